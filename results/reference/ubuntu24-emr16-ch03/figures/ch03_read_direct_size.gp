# concurdl chart: O_DIRECT: bytes/s vs request size (experiment ch03/read_direct)
# Re-run in the figures directory: gnuplot ch03_read_direct_size.gp
# It reads ch03_read_direct_size.dat and writes ch03_read_direct_size.svg and ch03_read_direct_size.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch03_read_direct_size.svg'

set title "O_DIRECT: bytes/s vs request size" noenhanced
set xlabel "request" noenhanced
set ylabel "bytes/s (log)" noenhanced
set grid
set key inside top right box opaque noenhanced
set logscale x 10
set logscale y
set format x "%.0s%c"
set format y "%.0s%c"
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

plot 'ch03_read_direct_size.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "pread, qd=1", \
     'ch03_read_direct_size.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "pread, qd=8", \
     'ch03_read_direct_size.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "uring, qd=1", \
     'ch03_read_direct_size.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "uring, qd=8", \
     'ch03_read_direct_size.dat' index 4 using 1:2:3:4 with yerrorlines lt 5 lw 2 pt 7 ps 0.8 title "uring_fixed, qd=1", \
     'ch03_read_direct_size.dat' index 5 using 1:2:3:4 with yerrorlines lt 6 lw 2 pt 7 ps 0.8 title "uring_fixed, qd=8"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch03_read_direct_size.png'
replot
unset output
