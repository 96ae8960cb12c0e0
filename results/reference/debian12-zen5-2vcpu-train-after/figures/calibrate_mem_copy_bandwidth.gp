# concurdl chart: Memory bandwidth vs threads (experiment calibrate/mem_copy)
# Re-run in the figures directory: gnuplot calibrate_mem_copy_bandwidth.gp
# It reads calibrate_mem_copy_bandwidth.dat and writes calibrate_mem_copy_bandwidth.svg and calibrate_mem_copy_bandwidth.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'calibrate_mem_copy_bandwidth.svg'

set title "Memory bandwidth vs threads" noenhanced
set xlabel "threads" noenhanced
set ylabel "bytes/s" noenhanced
set grid
set key inside bottom right box opaque noenhanced
set format y "%.1s%c"
set yrange [0:*]
set xtics (1, 2)
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

plot 'calibrate_mem_copy_bandwidth.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "measured"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'calibrate_mem_copy_bandwidth.png'
replot
unset output
