# concurdl chart: Memory bandwidth vs threads (experiment calibrate/mem_triad)
# Re-run in the figures directory: gnuplot calibrate_mem_triad_bandwidth.gp
# It reads calibrate_mem_triad_bandwidth.dat and writes calibrate_mem_triad_bandwidth.svg and calibrate_mem_triad_bandwidth.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'calibrate_mem_triad_bandwidth.svg'

set title "Memory bandwidth vs threads" noenhanced
set xlabel "threads" noenhanced
set ylabel "bytes/s" noenhanced
set grid
set key inside top left box opaque noenhanced
set format y "%.1s%c"
set yrange [0:*]
set xtics (1, 2)
set offsets graph 0.02, graph 0.02, 0, 0

plot 'calibrate_mem_triad_bandwidth.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "measured"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'calibrate_mem_triad_bandwidth.png'
replot
unset output
