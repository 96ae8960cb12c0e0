# concurdl chart: Bytes moved per second: coalesced vs strided access (experiment ch04/memory)
# Re-run in the figures directory: gnuplot ch04_memory_bandwidth.gp
# It reads ch04_memory_bandwidth.dat and writes ch04_memory_bandwidth.svg and ch04_memory_bandwidth.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch04_memory_bandwidth.svg'

set title "Bytes moved per second: coalesced vs strided access" noenhanced
set xlabel "n" noenhanced
set ylabel "bytes/s (declared traffic / time)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 1 Left reverse noenhanced
set bmargin 7.7
set logscale x 10
set format x "%.0s%c"
set format y "%.1s%c"
set yrange [0:*]
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

plot 'ch04_memory_bandwidth.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "vector_add", \
     'ch04_memory_bandwidth.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "copy_coalesced", \
     'ch04_memory_bandwidth.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "copy_strided", \
     'ch04_memory_bandwidth.dat' index 3 using 1:2 with linespoints lc rgb '#303030' dt 2 lw 2 pt 6 ps 0.7 title "model: roofline of the device (its query and a measured copy)"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch04_memory_bandwidth.png'
replot
unset output
