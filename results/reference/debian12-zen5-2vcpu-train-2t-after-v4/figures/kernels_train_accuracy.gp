# concurdl chart: Test accuracy per epoch (experiment kernels/train)
# Re-run in the figures directory: gnuplot kernels_train_accuracy.gp
# It reads kernels_train_accuracy.dat and writes kernels_train_accuracy.svg and kernels_train_accuracy.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'kernels_train_accuracy.svg'

set title "Test accuracy per epoch" noenhanced
set xlabel "epoch" noenhanced
set ylabel "test accuracy" noenhanced
set grid
set key inside bottom right box opaque noenhanced
set yrange [0:*]
set xtics (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
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

plot 'kernels_train_accuracy.dat' index 0 using 1:2 with linespoints lt 1 lw 2 pt 7 ps 0.8 title "784-256-128-10"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'kernels_train_accuracy.png'
replot
unset output
