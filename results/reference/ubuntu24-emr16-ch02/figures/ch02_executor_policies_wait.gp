# concurdl chart: Executor: average wait from release to start, FCFS vs SJF (experiment ch02/executor_policies)
# Re-run in the figures directory: gnuplot ch02_executor_policies_wait.gp
# It reads ch02_executor_policies_wait.dat and writes ch02_executor_policies_wait.svg and ch02_executor_policies_wait.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch02_executor_policies_wait.svg'

set title "Executor: average wait from release to start, FCFS vs SJF" noenhanced
set xlabel "workers" noenhanced
set ylabel "seconds" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 7 Left reverse noenhanced
set bmargin 4.5
set format y "%.1s%c"
set yrange [0:*]
set xtics ("1" 0, "16" 1) noenhanced
set xrange [-0.5:1.5]
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

plot 'ch02_executor_policies_wait.dat' index 0 using ($1-0.2000):2:(0.4) with boxes lt 1 title "fcfs", \
     'ch02_executor_policies_wait.dat' index 0 using ($1-0.2000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch02_executor_policies_wait.dat' index 1 using ($1+0.2000):2:(0.4) with boxes lt 2 title "sjf", \
     'ch02_executor_policies_wait.dat' index 1 using ($1+0.2000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch02_executor_policies_wait.png'
replot
unset output
