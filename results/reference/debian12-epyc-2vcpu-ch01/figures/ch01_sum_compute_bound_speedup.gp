# concurdl chart: Compute-bound sum: speedup over the same variant on 1 thread (experiment ch01/sum_compute_bound)
# Re-run in the figures directory: gnuplot ch01_sum_compute_bound_speedup.gp
# It reads ch01_sum_compute_bound_speedup.dat and writes ch01_sum_compute_bound_speedup.svg and ch01_sum_compute_bound_speedup.png; restyle freely.
# note: Karp–Flatt serial fraction e(p) for v0_serial: p=2: 0.996, p=4: 0.99, p=8: 0.992.
# note: Karp–Flatt serial fraction e(p) for v4_omp_reduction: p=2: 0.656, p=4: 0.846, p=8: 0.867.
# note: Karp–Flatt serial fraction e(p) for v5_std_par: p=2: 0.595, p=4: 0.498, p=8: 0.574.
# note: Karp–Flatt serial fraction e(p) for v6_pool: p=2: 0.592, p=4: 0.592, p=8: 0.568.
# note: Karp–Flatt serial fraction e(p) for v7_local_sums: p=2: 0.561, p=4: 0.576, p=8: 0.85.
# note: Karp–Flatt serial fraction e(p) for v8_std_par_unseq: p=2: 0.59, p=4: 0.728, p=8: 0.774.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch01_sum_compute_bound_speedup.svg'

set title "Compute-bound sum: speedup over the same variant on 1 thread" noenhanced
set xlabel "threads" noenhanced
set ylabel "speedup (×)" noenhanced
set grid
set key inside top left box opaque noenhanced
set yrange [0:*]
set xtics (1, 2, 4, 8)
set offsets graph 0.02, graph 0.02, 0, 0

plot 'ch01_sum_compute_bound_speedup.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "v0_serial", \
     'ch01_sum_compute_bound_speedup.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "v4_omp_reduction", \
     'ch01_sum_compute_bound_speedup.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "v5_std_par", \
     'ch01_sum_compute_bound_speedup.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "v6_pool", \
     'ch01_sum_compute_bound_speedup.dat' index 4 using 1:2:3:4 with yerrorlines lt 5 lw 2 pt 7 ps 0.8 title "v7_local_sums", \
     'ch01_sum_compute_bound_speedup.dat' index 5 using 1:2:3:4 with yerrorlines lt 6 lw 2 pt 7 ps 0.8 title "v8_std_par_unseq", \
     'ch01_sum_compute_bound_speedup.dat' index 6 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "ideal (S = p)"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_sum_compute_bound_speedup.png'
replot
unset output
