# concurdl chart: Medium (~10 us) tasks: speedup over the inline loop on 1 thread (experiment ch01/task_overhead)
# Re-run in the figures directory: gnuplot ch01_task_overhead_medium_speedup.gp
# It reads ch01_task_overhead_medium_speedup.dat and writes ch01_task_overhead_medium_speedup.svg and ch01_task_overhead_medium_speedup.png; restyle freely.
# note: Amdahl fit (v1_thread_per_task): serial fraction f = 1, fitted on p <= 16, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (v2_pool): serial fraction f = 0.145, fitted on p <= 16, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (v3_tbb_task_group): serial fraction f = 0.052, fitted on p <= 16, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (v4_omp_tasks): serial fraction f = 0.147, fitted on p <= 16, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (v5_stealing_pool): serial fraction f = 0.0132, fitted on p <= 16, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (v6_stealing_pool_mutex): serial fraction f = 0.015, fitted on p <= 16, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Karp–Flatt serial fraction e(p) for v1_thread_per_task: p=2: 5.21, p=4: 3.3, p=8: 7.52, p=16: 7.55, p=32: 8.03.
# note: Karp–Flatt serial fraction e(p) for v2_pool: p=2: 0.139, p=4: 0.0658, p=8: 0.0458, p=16: 0.285, p=32: 0.302.
# note: Karp–Flatt serial fraction e(p) for v3_tbb_task_group: p=2: 0.0188, p=4: 0.0434, p=8: 0.0551, p=16: 0.0644, p=32: 0.158.
# note: Karp–Flatt serial fraction e(p) for v4_omp_tasks: p=2: 0.0562, p=4: 0.039, p=8: 0.0248, p=16: 0.348, p=32: 0.327.
# note: Karp–Flatt serial fraction e(p) for v5_stealing_pool: p=2: 0.00957, p=4: 0.0226, p=8: 0.0118, p=16: 0.00944, p=32: 0.0445.
# note: Karp–Flatt serial fraction e(p) for v6_stealing_pool_mutex: p=2: 0.0367, p=4: 0.0126, p=8: 0.0139, p=16: 0.0112, p=32: 0.819.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch01_task_overhead_medium_speedup.svg'

set title "Medium (~10 us) tasks: speedup over the inline loop on 1 thread" noenhanced
set xlabel "threads" noenhanced
set ylabel "speedup (×)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 1 Left reverse noenhanced
set bmargin 17.2
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

plot 'ch01_task_overhead_medium_speedup.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "v1_thread_per_task", \
     'ch01_task_overhead_medium_speedup.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "v2_pool", \
     'ch01_task_overhead_medium_speedup.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "v3_tbb_task_group", \
     'ch01_task_overhead_medium_speedup.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "v4_omp_tasks", \
     'ch01_task_overhead_medium_speedup.dat' index 4 using 1:2:3:4 with yerrorlines lt 5 lw 2 pt 7 ps 0.8 title "v5_stealing_pool", \
     'ch01_task_overhead_medium_speedup.dat' index 5 using 1:2:3:4 with yerrorlines lt 6 lw 2 pt 7 ps 0.8 title "v6_stealing_pool_mutex", \
     'ch01_task_overhead_medium_speedup.dat' index 6 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "ideal (S = p)", \
     'ch01_task_overhead_medium_speedup.dat' index 7 using 1:2 with lines lt 1 dt 2 lw 1.5 title "Amdahl fit (v1_thread_per_task): f = 1", \
     'ch01_task_overhead_medium_speedup.dat' index 8 using 1:2 with lines lt 2 dt 2 lw 1.5 title "Amdahl fit (v2_pool): f = 0.145", \
     'ch01_task_overhead_medium_speedup.dat' index 9 using 1:2 with lines lt 3 dt 2 lw 1.5 title "Amdahl fit (v3_tbb_task_group): f = 0.052", \
     'ch01_task_overhead_medium_speedup.dat' index 10 using 1:2 with lines lt 4 dt 2 lw 1.5 title "Amdahl fit (v4_omp_tasks): f = 0.147", \
     'ch01_task_overhead_medium_speedup.dat' index 11 using 1:2 with lines lt 5 dt 2 lw 1.5 title "Amdahl fit (v5_stealing_pool): f = 0.0132", \
     'ch01_task_overhead_medium_speedup.dat' index 12 using 1:2 with lines lt 6 dt 2 lw 1.5 title "Amdahl fit (v6_stealing_pool_mutex): f = 0.015"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_task_overhead_medium_speedup.png'
replot
unset output
