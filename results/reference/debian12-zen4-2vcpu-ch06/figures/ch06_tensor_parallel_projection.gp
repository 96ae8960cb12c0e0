# concurdl chart: Megatron MLP block time against ranks, measured and projected (alpha-beta) (experiment ch06/tensor_parallel)
# Re-run in the figures directory: gnuplot ch06_tensor_parallel_projection.gp
# It reads ch06_tensor_parallel_projection.dat and writes ch06_tensor_parallel_projection.svg and ch06_tensor_parallel_projection.png; restyle freely.
# note: model: projected: 25 GB/s, alpha 2 us: projection: block(p) = block(1)/p + 2 ring all-reduces of batch x width floats, 2(p-1) alpha + 2(p-1)/p bytes beta each; a model, not a measurement
# note: model: projected: 100 Gb/s Ethernet, alpha 20 us: projection: block(p) = block(1)/p + 2 ring all-reduces of batch x width floats, 2(p-1) alpha + 2(p-1)/p bytes beta each; a model, not a measurement

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch06_tensor_parallel_projection.svg'

set title "Megatron MLP block time against ranks, measured and projected (alpha-beta)" noenhanced
set xlabel "ranks p (log)" noenhanced
set ylabel "forward + backward (s, log)" noenhanced
set grid
set key inside top right box opaque noenhanced font ',9' spacing 0.95
set logscale x 2
set logscale y
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

plot 'ch06_tensor_parallel_projection.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "width=1024", \
     'ch06_tensor_parallel_projection.dat' index 1 using 1:2 with linespoints lc rgb '#303030' dt 2 lw 2 pt 6 ps 0.7 title "model: projected: 25 GB/s, alpha 2 us", \
     'ch06_tensor_parallel_projection.dat' index 2 using 1:2 with linespoints lc rgb '#6a3d9a' dt 2 lw 2 pt 6 ps 0.7 title "model: projected: 100 Gb/s Ethernet, alpha 20 us"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch06_tensor_parallel_projection.png'
replot
unset output
