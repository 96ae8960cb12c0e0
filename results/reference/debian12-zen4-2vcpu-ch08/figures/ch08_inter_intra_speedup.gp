# concurdl chart: Speedup over one thread, by graph and split (inter-op x intra-op) (experiment ch08/inter_intra)
# Re-run in the figures directory: gnuplot ch08_inter_intra_speedup.gp
# It reads ch08_inter_intra_speedup.dat and writes ch08_inter_intra_speedup.svg and ch08_inter_intra_speedup.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch08_inter_intra_speedup.svg'

set title "Speedup over one thread, by graph and split (inter-op x intra-op)" noenhanced
set xlabel "graph" noenhanced
set ylabel "speedup over 1x1" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 7 Left reverse noenhanced
set bmargin 4.5
set yrange [0:*]
set xtics ("wide" 0, "deep" 1, "mlp" 2) noenhanced
set xrange [-0.5:2.5]
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

plot 'ch08_inter_intra_speedup.dat' index 0 using ($1-0.3000):2:(0.2) with boxes lt 1 title "1x1", \
     'ch08_inter_intra_speedup.dat' index 0 using ($1-0.3000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch08_inter_intra_speedup.dat' index 1 using ($1-0.1000):2:(0.2) with boxes lt 2 title "1x2", \
     'ch08_inter_intra_speedup.dat' index 1 using ($1-0.1000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch08_inter_intra_speedup.dat' index 2 using ($1+0.1000):2:(0.2) with boxes lt 3 title "2x1", \
     'ch08_inter_intra_speedup.dat' index 2 using ($1+0.1000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch08_inter_intra_speedup.dat' index 3 using ($1+0.3000):2:(0.2) with boxes lt 4 title "2x2", \
     'ch08_inter_intra_speedup.dat' index 3 using ($1+0.3000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch08_inter_intra_speedup.png'
replot
unset output
