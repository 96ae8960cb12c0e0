# concurdl chart: Lock acquisitions/s vs threads, empty critical section (experiment ch02/lock_throughput)
# Re-run in the figures directory: gnuplot ch02_lock_throughput_cs_empty.gp
# It reads ch02_lock_throughput_cs_empty.dat and writes ch02_lock_throughput_cs_empty.svg and ch02_lock_throughput_cs_empty.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch02_lock_throughput_cs_empty.svg'

set title "Lock acquisitions/s vs threads, empty critical section" noenhanced
set xlabel "threads" noenhanced
set ylabel "acquisitions/s (log)" noenhanced
set grid
set key inside top right box opaque noenhanced
set logscale y
set format y "%.0s%c"
set xtics (1, 2, 4, 8, 16)
set offsets graph 0.02, graph 0.02, 0, 0
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

plot 'ch02_lock_throughput_cs_empty.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "std_mutex", \
     'ch02_lock_throughput_cs_empty.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "v1_tas", \
     'ch02_lock_throughput_cs_empty.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "v2_ttas", \
     'ch02_lock_throughput_cs_empty.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "v3_ttas_backoff", \
     'ch02_lock_throughput_cs_empty.dat' index 4 using 1:2:3:4 with yerrorlines lt 5 lw 2 pt 7 ps 0.8 title "v4_ticket", \
     'ch02_lock_throughput_cs_empty.dat' index 5 using 1:2:3:4 with yerrorlines lt 6 lw 2 pt 7 ps 0.8 title "v5_mcs"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch02_lock_throughput_cs_empty.png'
replot
unset output
