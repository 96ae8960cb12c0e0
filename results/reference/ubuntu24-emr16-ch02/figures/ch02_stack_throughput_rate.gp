# concurdl chart: Stacks: push and pop operations/s (experiment ch02/stack_throughput)
# Re-run in the figures directory: gnuplot ch02_stack_throughput_rate.gp
# It reads ch02_stack_throughput_rate.dat and writes ch02_stack_throughput_rate.svg and ch02_stack_throughput_rate.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch02_stack_throughput_rate.svg'

set title "Stacks: push and pop operations/s" noenhanced
set xlabel "threads" noenhanced
set ylabel "operations/s" noenhanced
set grid
set key inside top right box opaque noenhanced
set format y "%.1s%c"
set yrange [0:*]
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

plot 'ch02_stack_throughput_rate.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "locked_stack", \
     'ch02_stack_throughput_rate.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "treiber_stack"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch02_stack_throughput_rate.png'
replot
unset output
