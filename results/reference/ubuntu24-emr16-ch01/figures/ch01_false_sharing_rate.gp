# concurdl chart: Sharing: elements/s, one atomic vs adjacent vs padded slots (experiment ch01/false_sharing)
# Re-run in the figures directory: gnuplot ch01_false_sharing_rate.gp
# It reads ch01_false_sharing_rate.dat and writes ch01_false_sharing_rate.svg and ch01_false_sharing_rate.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch01_false_sharing_rate.svg'

set title "Sharing: elements/s, one atomic vs adjacent vs padded slots" noenhanced
set xlabel "threads" noenhanced
set ylabel "items/s" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 3 Left reverse noenhanced
set bmargin 4.5
set format y "%.1s%c"
set yrange [0:*]
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

plot 'ch01_false_sharing_rate.dat' index 0 using ($1-0.2667):2:(0.2666666667) with boxes lt 1 title "v1_atomic", \
     'ch01_false_sharing_rate.dat' index 0 using ($1-0.2667):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch01_false_sharing_rate.dat' index 1 using ($1+0.0000):2:(0.2666666667) with boxes lt 2 title "v2_adjacent_partials", \
     'ch01_false_sharing_rate.dat' index 1 using ($1+0.0000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch01_false_sharing_rate.dat' index 2 using ($1+0.2667):2:(0.2666666667) with boxes lt 3 title "v3_padded_partials", \
     'ch01_false_sharing_rate.dat' index 2 using ($1+0.2667):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_false_sharing_rate.png'
replot
unset output
