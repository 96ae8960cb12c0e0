# concurdl chart: Transpose (n x n+1): bytes moved per second (experiment ch04/transpose)
# Re-run in the figures directory: gnuplot ch04_transpose_bandwidth.gp
# It reads ch04_transpose_bandwidth.dat and writes ch04_transpose_bandwidth.svg and ch04_transpose_bandwidth.png; restyle freely.
# note: model: roofline of the device (its query and a measured copy): no value at x = 2048 (a gap in the curve).

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch04_transpose_bandwidth.svg'

set title "Transpose (n x n+1): bytes moved per second" noenhanced
set xlabel "n" noenhanced
set ylabel "bytes/s (read + written / time)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 1 Left reverse noenhanced
set bmargin 7.7
set logscale x 10
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

plot 'ch04_transpose_bandwidth.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "naive", \
     'ch04_transpose_bandwidth.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "shared", \
     'ch04_transpose_bandwidth.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "padded", \
     'ch04_transpose_bandwidth.dat' index 3 using 1:2 with linespoints lc rgb '#303030' dt 2 lw 2 pt 6 ps 0.7 title "model: roofline of the device (its query and a measured copy)"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch04_transpose_bandwidth.png'
replot
unset output
