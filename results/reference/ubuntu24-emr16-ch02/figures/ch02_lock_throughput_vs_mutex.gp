# concurdl chart: Lock throughput relative to std::mutex, 100ns critical section (experiment ch02/lock_throughput)
# Re-run in the figures directory: gnuplot ch02_lock_throughput_vs_mutex.gp
# It reads ch02_lock_throughput_vs_mutex.dat and writes ch02_lock_throughput_vs_mutex.svg and ch02_lock_throughput_vs_mutex.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch02_lock_throughput_vs_mutex.svg'

set title "Lock throughput relative to std::mutex, 100ns critical section" noenhanced
set xlabel "threads" noenhanced
set ylabel "throughput / std::mutex's (log)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 3 Left reverse noenhanced
set bmargin 5.6
set logscale y
set xtics ("1" 0, "2" 1, "4" 2, "8" 3, "16" 4) noenhanced
set xrange [-0.5:4.5]
set style fill solid 0.75 border -1
set linetype 1 lc rgb '#1f77b4'
set linetype 2 lc rgb '#ff7f0e'
set linetype 3 lc rgb '#2ca02c'
set linetype 4 lc rgb '#d62728'
set linetype 5 lc rgb '#9467bd'
set linetype 6 lc rgb '#8c564b'
set linetype 7 lc rgb '#e377c2'
set linetype 8 lc rgb '#7f7f7f'
set linetype 9 lc rgb '#bcbd22'
set linetype 10 lc rgb '#17becf'
set linetype 11 lc rgb '#000080'
set linetype 12 lc rgb '#808000'
set linetype cycle 12

plot 'ch02_lock_throughput_vs_mutex.dat' index 0 using ($1-0.3333):2:(0.1333333333) with boxes lt 1 title "std_mutex", \
     'ch02_lock_throughput_vs_mutex.dat' index 0 using ($1-0.3333):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch02_lock_throughput_vs_mutex.dat' index 1 using ($1-0.2000):2:(0.1333333333) with boxes lt 2 title "v1_tas", \
     'ch02_lock_throughput_vs_mutex.dat' index 1 using ($1-0.2000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch02_lock_throughput_vs_mutex.dat' index 2 using ($1-0.0667):2:(0.1333333333) with boxes lt 3 title "v2_ttas", \
     'ch02_lock_throughput_vs_mutex.dat' index 2 using ($1-0.0667):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch02_lock_throughput_vs_mutex.dat' index 3 using ($1+0.0667):2:(0.1333333333) with boxes lt 4 title "v3_ttas_backoff", \
     'ch02_lock_throughput_vs_mutex.dat' index 3 using ($1+0.0667):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch02_lock_throughput_vs_mutex.dat' index 4 using ($1+0.2000):2:(0.1333333333) with boxes lt 5 title "v4_ticket", \
     'ch02_lock_throughput_vs_mutex.dat' index 4 using ($1+0.2000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch02_lock_throughput_vs_mutex.dat' index 5 using ($1+0.3333):2:(0.1333333333) with boxes lt 6 title "v5_mcs", \
     'ch02_lock_throughput_vs_mutex.dat' index 5 using ($1+0.3333):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch02_lock_throughput_vs_mutex.png'
replot
unset output
