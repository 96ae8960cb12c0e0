# concurdl chart: Tiny (empty) tasks: tasks/s; 1e9 / rate = ns per task (experiment ch01/task_overhead)
# Re-run in the figures directory: gnuplot ch01_task_overhead_tiny_rate.gp
# It reads ch01_task_overhead_tiny_rate.dat and writes ch01_task_overhead_tiny_rate.svg and ch01_task_overhead_tiny_rate.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch01_task_overhead_tiny_rate.svg'

set title "Tiny (empty) tasks: tasks/s; 1e9 / rate = ns per task" noenhanced
set xlabel "threads" noenhanced
set ylabel "tasks/s (log)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 3 Left reverse noenhanced
set bmargin 5.6
set logscale y
set format y "%.0s%c"
set xtics ("1" 0, "2" 1, "4" 2, "8" 3, "16" 4, "32" 5) noenhanced
set xrange [-0.5:5.5]
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

plot 'ch01_task_overhead_tiny_rate.dat' index 0 using ($1-0.3333):2:(0.1333333333) with boxes lt 1 title "v1_thread_per_task", \
     'ch01_task_overhead_tiny_rate.dat' index 0 using ($1-0.3333):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch01_task_overhead_tiny_rate.dat' index 1 using ($1-0.2000):2:(0.1333333333) with boxes lt 2 title "v2_pool", \
     'ch01_task_overhead_tiny_rate.dat' index 1 using ($1-0.2000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch01_task_overhead_tiny_rate.dat' index 2 using ($1-0.0667):2:(0.1333333333) with boxes lt 3 title "v3_tbb_task_group", \
     'ch01_task_overhead_tiny_rate.dat' index 2 using ($1-0.0667):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch01_task_overhead_tiny_rate.dat' index 3 using ($1+0.0667):2:(0.1333333333) with boxes lt 4 title "v4_omp_tasks", \
     'ch01_task_overhead_tiny_rate.dat' index 3 using ($1+0.0667):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch01_task_overhead_tiny_rate.dat' index 4 using ($1+0.2000):2:(0.1333333333) with boxes lt 5 title "v5_stealing_pool", \
     'ch01_task_overhead_tiny_rate.dat' index 4 using ($1+0.2000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch01_task_overhead_tiny_rate.dat' index 5 using ($1+0.3333):2:(0.1333333333) with boxes lt 6 title "v6_stealing_pool_mutex", \
     'ch01_task_overhead_tiny_rate.dat' index 5 using ($1+0.3333):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_task_overhead_tiny_rate.png'
replot
unset output
