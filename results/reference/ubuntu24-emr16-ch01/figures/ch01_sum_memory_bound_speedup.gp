# concurdl chart: Memory-bound sum: speedup over the same variant on 1 thread (experiment ch01/sum_memory_bound)
# Re-run in the figures directory: gnuplot ch01_sum_memory_bound_speedup.gp
# It reads ch01_sum_memory_bound_speedup.dat and writes ch01_sum_memory_bound_speedup.svg and ch01_sum_memory_bound_speedup.png; restyle freely.
# note: Karp–Flatt serial fraction e(p) for v4_omp_reduction: p=2: 0.0419, p=4: 0.0642, p=8: 0.0423, p=16: 0.0406, p=32: 0.101.
# note: Karp–Flatt serial fraction e(p) for v5_std_par: p=2: 0.0817, p=4: 0.0377, p=8: 0.0285, p=16: 0.0255, p=32: 0.0615.
# note: Karp–Flatt serial fraction e(p) for v6_pool: p=2: 0.0356, p=4: 0.0433, p=8: 0.0443, p=16: 0.0451, p=32: 0.0695.
# note: Karp–Flatt serial fraction e(p) for v7_local_sums: p=2: 0.0563, p=4: 0.0447, p=8: 0.0576, p=16: 0.0493, p=32: 0.0811.
# note: Karp–Flatt serial fraction e(p) for v8_std_par_unseq: p=2: 0.0661, p=4: 0.0277, p=8: 0.0221, p=16: 0.0246, p=32: 0.0572.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch01_sum_memory_bound_speedup.svg'

set title "Memory-bound sum: speedup over the same variant on 1 thread" noenhanced
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

plot 'ch01_sum_memory_bound_speedup.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "v4_omp_reduction", \
     'ch01_sum_memory_bound_speedup.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "v5_std_par", \
     'ch01_sum_memory_bound_speedup.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "v6_pool", \
     'ch01_sum_memory_bound_speedup.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "v7_local_sums", \
     'ch01_sum_memory_bound_speedup.dat' index 4 using 1:2:3:4 with yerrorlines lt 5 lw 2 pt 7 ps 0.8 title "v8_std_par_unseq", \
     'ch01_sum_memory_bound_speedup.dat' index 5 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "ideal (S = p)"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_sum_memory_bound_speedup.png'
replot
unset output
