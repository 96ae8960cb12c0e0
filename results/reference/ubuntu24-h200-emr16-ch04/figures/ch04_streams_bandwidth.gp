# concurdl chart: Bytes across the bus per second, round trip with the kernel (experiment ch04/streams)
# Re-run in the figures directory: gnuplot ch04_streams_bandwidth.gp
# It reads ch04_streams_bandwidth.dat and writes ch04_streams_bandwidth.svg and ch04_streams_bandwidth.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch04_streams_bandwidth.svg'

set title "Bytes across the bus per second, round trip with the kernel" noenhanced
set xlabel "n" noenhanced
set ylabel "bytes/s (in + out / round-trip time)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 2 Left reverse noenhanced
set bmargin 5.6
set format y "%.1s%c"
set yrange [0:*]
set xtics ("256M" 0) noenhanced
set xrange [-0.5:0.5]
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

plot 'ch04_streams_bandwidth.dat' index 0 using ($1-0.2667):2:(0.2666666667) with boxes lt 1 title "pageable_sync, chunks=-", \
     'ch04_streams_bandwidth.dat' index 0 using ($1-0.2667):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch04_streams_bandwidth.dat' index 1 using ($1+0.0000):2:(0.2666666667) with boxes lt 2 title "pinned_sync, chunks=-", \
     'ch04_streams_bandwidth.dat' index 1 using ($1+0.0000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch04_streams_bandwidth.dat' index 2 using ($1+0.2667):2:(0.2666666667) with boxes lt 3 title "pinned_streams, chunks=4", \
     'ch04_streams_bandwidth.dat' index 2 using ($1+0.2667):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch04_streams_bandwidth.png'
replot
unset output
