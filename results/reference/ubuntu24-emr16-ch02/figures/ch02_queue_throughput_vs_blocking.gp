# concurdl chart: MPMC queues: items/s relative to the mutex + condvar queue (experiment ch02/queue_throughput)
# Re-run in the figures directory: gnuplot ch02_queue_throughput_vs_blocking.gp
# It reads ch02_queue_throughput_vs_blocking.dat and writes ch02_queue_throughput_vs_blocking.svg and ch02_queue_throughput_vs_blocking.png; restyle freely.
# note: 4 invalid records left out of this chart (see the table).

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch02_queue_throughput_vs_blocking.svg'

set title "MPMC queues: items/s relative to the mutex + condvar queue" noenhanced
set xlabel "threads" noenhanced
set ylabel "items/s / v1_blocking_queue's (log)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 3 Left reverse noenhanced
set bmargin 5.6
set logscale y
set xtics ("2" 0, "4" 1, "8" 2, "16" 3) noenhanced
set xrange [-0.5:3.5]
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

plot 'ch02_queue_throughput_vs_blocking.dat' index 0 using ($1-0.3000):2:(0.2) with boxes lt 1 title "v1_blocking_queue", \
     'ch02_queue_throughput_vs_blocking.dat' index 0 using ($1-0.3000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch02_queue_throughput_vs_blocking.dat' index 1 using ($1-0.1000):2:(0.2) with boxes lt 2 title "v2_ring_queue", \
     'ch02_queue_throughput_vs_blocking.dat' index 1 using ($1-0.1000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch02_queue_throughput_vs_blocking.dat' index 2 using ($1+0.1000):2:(0.2) with boxes lt 3 title "moodycamel", \
     'ch02_queue_throughput_vs_blocking.dat' index 2 using ($1+0.1000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch02_queue_throughput_vs_blocking.dat' index 3 using ($1+0.3000):2:(0.2) with boxes lt 4 title "tbb_bounded", \
     'ch02_queue_throughput_vs_blocking.dat' index 3 using ($1+0.3000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch02_queue_throughput_vs_blocking.png'
replot
unset output
