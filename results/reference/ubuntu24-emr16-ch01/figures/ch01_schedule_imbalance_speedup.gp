# concurdl chart: Mandelbrot rows: speedup vs threads per schedule (experiment ch01/schedule_imbalance)
# Re-run in the figures directory: gnuplot ch01_schedule_imbalance_speedup.gp
# It reads ch01_schedule_imbalance_speedup.dat and writes ch01_schedule_imbalance_speedup.svg and ch01_schedule_imbalance_speedup.png; restyle freely.
# note: Amdahl fit (omp_static): serial fraction f = 0.308, fitted on p <= 16, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (omp_static_chunk1): serial fraction f = 0.0413, fitted on p <= 16, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (omp_dynamic): serial fraction f = 0.0318, fitted on p <= 16, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (omp_guided): serial fraction f = 0.311, fitted on p <= 16, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (pool_static_blocks): serial fraction f = 0.264, fitted on p <= 16, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (pool_dynamic_rows): serial fraction f = 0.0148, fitted on p <= 16, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Karp–Flatt serial fraction e(p) for omp_static: p=2: 0.852, p=4: 0.43, p=8: 0.23, p=16: 0.144, p=32: 0.229.
# note: Karp–Flatt serial fraction e(p) for omp_static_chunk1: p=2: 0.0398, p=4: 0.0288, p=8: 0.0359, p=16: 0.0544, p=32: 0.154.
# note: Karp–Flatt serial fraction e(p) for omp_dynamic: p=2: 0.0361, p=4: 0.0211, p=8: 0.0241, p=16: 0.0441, p=32: 0.147.
# note: Karp–Flatt serial fraction e(p) for omp_guided: p=2: 0.866, p=4: 0.428, p=8: 0.233, p=16: 0.145, p=32: 0.24.
# note: Karp–Flatt serial fraction e(p) for pool_static_blocks: p=2: 0.755, p=4: 0.391, p=8: 0.202, p=16: 0.0971, p=32: 0.0525.
# note: Karp–Flatt serial fraction e(p) for pool_dynamic_rows: p=2: 0.0354, p=4: 0.0208, p=8: 0.0109, p=16: 0.00854, p=32: 0.0496.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch01_schedule_imbalance_speedup.svg'

set title "Mandelbrot rows: speedup vs threads per schedule" noenhanced
set xlabel "threads" noenhanced
set ylabel "speedup (×)" noenhanced
set grid
set key inside top left box opaque noenhanced font ',9' spacing 0.95
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

plot 'ch01_schedule_imbalance_speedup.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "omp_static", \
     'ch01_schedule_imbalance_speedup.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "omp_static_chunk1", \
     'ch01_schedule_imbalance_speedup.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "omp_dynamic", \
     'ch01_schedule_imbalance_speedup.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "omp_guided", \
     'ch01_schedule_imbalance_speedup.dat' index 4 using 1:2:3:4 with yerrorlines lt 5 lw 2 pt 7 ps 0.8 title "pool_static_blocks", \
     'ch01_schedule_imbalance_speedup.dat' index 5 using 1:2:3:4 with yerrorlines lt 6 lw 2 pt 7 ps 0.8 title "pool_dynamic_rows", \
     'ch01_schedule_imbalance_speedup.dat' index 6 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "ideal (S = p)", \
     'ch01_schedule_imbalance_speedup.dat' index 7 using 1:2 with lines lt 1 dt 2 lw 1.5 title "Amdahl fit (omp_static): f = 0.308", \
     'ch01_schedule_imbalance_speedup.dat' index 8 using 1:2 with lines lt 2 dt 2 lw 1.5 title "Amdahl fit (omp_static_chunk1): f = 0.0413", \
     'ch01_schedule_imbalance_speedup.dat' index 9 using 1:2 with lines lt 3 dt 2 lw 1.5 title "Amdahl fit (omp_dynamic): f = 0.0318", \
     'ch01_schedule_imbalance_speedup.dat' index 10 using 1:2 with lines lt 4 dt 2 lw 1.5 title "Amdahl fit (omp_guided): f = 0.311", \
     'ch01_schedule_imbalance_speedup.dat' index 11 using 1:2 with lines lt 5 dt 2 lw 1.5 title "Amdahl fit (pool_static_blocks): f = 0.264", \
     'ch01_schedule_imbalance_speedup.dat' index 12 using 1:2 with lines lt 6 dt 2 lw 1.5 title "Amdahl fit (pool_dynamic_rows): f = 0.0148"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_schedule_imbalance_speedup.png'
replot
unset output
