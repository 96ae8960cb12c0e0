# concurdl chart: Compute-bound sum: FP64 FLOP/s (dashed: calibrated FP32 FMA peak) (experiment ch01/sum_compute_bound)
# Re-run in the figures directory: gnuplot ch01_sum_compute_bound_flops.gp
# It reads ch01_sum_compute_bound_flops.dat and writes ch01_sum_compute_bound_flops.svg and ch01_sum_compute_bound_flops.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch01_sum_compute_bound_flops.svg'

set title "Compute-bound sum: FP64 FLOP/s (dashed: calibrated FP32 FMA peak)" noenhanced
set xlabel "threads" noenhanced
set ylabel "FLOP/s" noenhanced
set grid
set key inside bottom right box opaque noenhanced
set logscale y
set format y "%.0s%c"
set xtics (1, 2, 4, 8, 16, 32)
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

plot 'ch01_sum_compute_bound_flops.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "v4_omp_reduction", \
     'ch01_sum_compute_bound_flops.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "v5_std_par", \
     'ch01_sum_compute_bound_flops.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "v6_pool", \
     'ch01_sum_compute_bound_flops.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "v7_local_sums", \
     'ch01_sum_compute_bound_flops.dat' index 4 using 1:2:3:4 with yerrorlines lt 5 lw 2 pt 7 ps 0.8 title "v8_std_par_unseq", \
     'ch01_sum_compute_bound_flops.dat' index 5 using 1:2:3:4 with yerrorlines lt 6 lw 2 pt 7 ps 0.8 title "v9_independent_copies", \
     'ch01_sum_compute_bound_flops.dat' index 6 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "measured peak FLOP/s, all cores (calibrate)"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_sum_compute_bound_flops.png'
replot
unset output
