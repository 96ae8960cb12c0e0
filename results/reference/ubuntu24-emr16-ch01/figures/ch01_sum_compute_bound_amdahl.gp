# concurdl chart: Compute-bound sum, v7_local_sums: speedup and Amdahl fit (experiment ch01/sum_compute_bound)
# Re-run in the figures directory: gnuplot ch01_sum_compute_bound_amdahl.gp
# It reads ch01_sum_compute_bound_amdahl.dat and writes ch01_sum_compute_bound_amdahl.svg and ch01_sum_compute_bound_amdahl.png; restyle freely.
# note: Amdahl fit (v7_local_sums): serial fraction f = 0.0798, fitted on p <= 16, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Karp–Flatt serial fraction e(p) for v7_local_sums: p=2: 0.0874, p=4: 0.0613, p=8: 0.0648, p=16: 0.102, p=32: 0.209.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch01_sum_compute_bound_amdahl.svg'

set title "Compute-bound sum, v7_local_sums: speedup and Amdahl fit" noenhanced
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

plot 'ch01_sum_compute_bound_amdahl.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "v7_local_sums", \
     'ch01_sum_compute_bound_amdahl.dat' index 1 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "ideal (S = p)", \
     'ch01_sum_compute_bound_amdahl.dat' index 2 using 1:2 with lines lt 1 dt 2 lw 1.5 title "Amdahl fit (v7_local_sums): f = 0.0798"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_sum_compute_bound_amdahl.png'
replot
unset output
