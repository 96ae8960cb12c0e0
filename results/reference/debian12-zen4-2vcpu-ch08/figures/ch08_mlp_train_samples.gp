# concurdl chart: Samples per second training the MLP (784-256-128-10, batches of 64) (experiment ch08/mlp_train)
# Re-run in the figures directory: gnuplot ch08_mlp_train_samples.gp
# It reads ch08_mlp_train_samples.dat and writes ch08_mlp_train_samples.svg and ch08_mlp_train_samples.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch08_mlp_train_samples.svg'

set title "Samples per second training the MLP (784-256-128-10, batches of 64)" noenhanced
set xlabel "threads" noenhanced
set ylabel "samples/s" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 5 Left reverse noenhanced
set bmargin 4.5
set format y "%.1s%c"
set yrange [0:*]
set xtics ("1" 0, "2" 1) noenhanced
set xrange [-0.5:1.5]
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

plot 'ch08_mlp_train_samples.dat' index 0 using ($1-0.3000):2:(0.2) with boxes lt 1 title "nn", \
     'ch08_mlp_train_samples.dat' index 0 using ($1-0.3000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch08_mlp_train_samples.dat' index 1 using ($1-0.1000):2:(0.2) with boxes lt 2 title "sequential", \
     'ch08_mlp_train_samples.dat' index 1 using ($1-0.1000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch08_mlp_train_samples.dat' index 2 using ($1+0.1000):2:(0.2) with boxes lt 3 title "parallel", \
     'ch08_mlp_train_samples.dat' index 2 using ($1+0.1000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch08_mlp_train_samples.dat' index 3 using ($1+0.3000):2:(0.2) with boxes lt 4 title "tbb_flow", \
     'ch08_mlp_train_samples.dat' index 3 using ($1+0.3000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch08_mlp_train_samples.png'
replot
unset output
