# concurdl chart: Compute-bound sum: speedup over the same variant on 1 thread (experiment ch01/sum_compute_bound)
# Re-run in the figures directory: gnuplot ch01_sum_compute_bound_speedup.gp
# It reads ch01_sum_compute_bound_speedup.dat and writes ch01_sum_compute_bound_speedup.svg and ch01_sum_compute_bound_speedup.png; restyle freely.
# note: Karp–Flatt serial fraction e(p) for v4_omp_reduction: p=2: 0.129, p=4: 0.0442, p=8: 0.0499, p=16: 0.0795, p=32: 0.257.
# note: Karp–Flatt serial fraction e(p) for v5_std_par: p=2: 0.0258, p=4: -0.0315, p=8: -0.0154, p=16: 1.17e-05, p=32: 0.0361.
# note: Karp–Flatt serial fraction e(p) for v6_pool: p=2: -0.0193, p=4: 0.0311, p=8: 0.0233, p=16: 0.0478, p=32: 0.0614.
# note: Karp–Flatt serial fraction e(p) for v7_local_sums: p=2: 0.0874, p=4: 0.0613, p=8: 0.0648, p=16: 0.102, p=32: 0.209.
# note: Karp–Flatt serial fraction e(p) for v8_std_par_unseq: p=2: -0.184, p=4: -0.022, p=8: 0.0134, p=16: 0.0146, p=32: 0.0558.
# note: Karp–Flatt serial fraction e(p) for v9_independent_copies: p=2: -0.0319, p=4: -0.0135, p=8: -0.00371, p=16: -0.0047, p=32: 0.0149.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch01_sum_compute_bound_speedup.svg'

set title "Compute-bound sum: speedup over the same variant on 1 thread" noenhanced
set xlabel "threads" noenhanced
set ylabel "speedup (×)" noenhanced
set grid
set key inside top left box opaque noenhanced
set yrange [0:*]
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

plot 'ch01_sum_compute_bound_speedup.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "v4_omp_reduction", \
     'ch01_sum_compute_bound_speedup.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "v5_std_par", \
     'ch01_sum_compute_bound_speedup.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "v6_pool", \
     'ch01_sum_compute_bound_speedup.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "v7_local_sums", \
     'ch01_sum_compute_bound_speedup.dat' index 4 using 1:2:3:4 with yerrorlines lt 5 lw 2 pt 7 ps 0.8 title "v8_std_par_unseq", \
     'ch01_sum_compute_bound_speedup.dat' index 5 using 1:2:3:4 with yerrorlines lt 6 lw 2 pt 7 ps 0.8 title "v9_independent_copies", \
     'ch01_sum_compute_bound_speedup.dat' index 6 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "ideal (S = p)"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_sum_compute_bound_speedup.png'
replot
unset output
