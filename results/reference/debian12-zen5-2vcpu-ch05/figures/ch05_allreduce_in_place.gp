# concurdl chart: All-reduce of 64 MiB (threads): busbw in place vs out of place (experiment ch05/allreduce)
# Re-run in the figures directory: gnuplot ch05_allreduce_in_place.gp
# It reads ch05_allreduce_in_place.dat and writes ch05_allreduce_in_place.svg and ch05_allreduce_in_place.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch05_allreduce_in_place.svg'

set title "All-reduce of 64 MiB (threads): busbw in place vs out of place" noenhanced
set xlabel "algorithm" noenhanced
set ylabel "busbw (bytes/s)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 4 Left reverse noenhanced
set bmargin 4.5
set format y "%.1s%c"
set yrange [0:*]
set xtics ("v1_naive" 0, "v2_tree" 1, "v3_halving_doubling" 2, "v4_ring" 3, "native" 4) noenhanced
set xrange [-0.5:4.5]
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

plot 'ch05_allreduce_in_place.dat' index 0 using ($1-0.3000):2:(0.2) with boxes lt 1 title "no, ranks=2", \
     'ch05_allreduce_in_place.dat' index 0 using ($1-0.3000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch05_allreduce_in_place.dat' index 1 using ($1-0.1000):2:(0.2) with boxes lt 2 title "yes, ranks=2", \
     'ch05_allreduce_in_place.dat' index 1 using ($1-0.1000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch05_allreduce_in_place.dat' index 2 using ($1+0.1000):2:(0.2) with boxes lt 3 title "no, ranks=4", \
     'ch05_allreduce_in_place.dat' index 2 using ($1+0.1000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch05_allreduce_in_place.dat' index 3 using ($1+0.3000):2:(0.2) with boxes lt 4 title "yes, ranks=4", \
     'ch05_allreduce_in_place.dat' index 3 using ($1+0.3000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch05_allreduce_in_place.png'
replot
unset output
