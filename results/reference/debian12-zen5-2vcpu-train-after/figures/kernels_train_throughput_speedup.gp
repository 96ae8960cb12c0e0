# concurdl chart: Training speedup against threads (vs 1 thread) (experiment kernels/train_throughput)
# Re-run in the figures directory: gnuplot kernels_train_throughput_speedup.gp
# It reads kernels_train_throughput_speedup.dat and writes kernels_train_throughput_speedup.svg and kernels_train_throughput_speedup.png; restyle freely.
# note: Amdahl fit (openblas): serial fraction f = 0.198, fitted on p <= 2, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (v4_register): serial fraction f = 0.253, fitted on p <= 2, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (pytorch): serial fraction f = 1, fitted on p <= 2, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Karp–Flatt serial fraction e(p) for openblas: p=2: 0.198, p=4: 0.642.
# note: Karp–Flatt serial fraction e(p) for v4_register: p=2: 0.253, p=4: 1.83.
# note: Karp–Flatt serial fraction e(p) for pytorch: p=2: 1.04, p=4: 1.42.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'kernels_train_throughput_speedup.svg'

set title "Training speedup against threads (vs 1 thread)" noenhanced
set xlabel "threads" noenhanced
set ylabel "speedup (×)" noenhanced
set grid
set key inside top left box opaque noenhanced
set yrange [0:*]
set xtics (1, 2, 4)
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

plot 'kernels_train_throughput_speedup.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "openblas", \
     'kernels_train_throughput_speedup.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "v4_register", \
     'kernels_train_throughput_speedup.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "pytorch", \
     'kernels_train_throughput_speedup.dat' index 3 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "ideal (S = p)", \
     'kernels_train_throughput_speedup.dat' index 4 using 1:2 with lines lt 1 dt 2 lw 1.5 title "Amdahl fit (openblas): f = 0.198", \
     'kernels_train_throughput_speedup.dat' index 5 using 1:2 with lines lt 2 dt 2 lw 1.5 title "Amdahl fit (v4_register): f = 0.253", \
     'kernels_train_throughput_speedup.dat' index 6 using 1:2 with lines lt 3 dt 2 lw 1.5 title "Amdahl fit (pytorch): f = 1"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'kernels_train_throughput_speedup.png'
replot
unset output
