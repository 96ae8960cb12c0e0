# concurdl chart: Weak scaling (64 rows per rank): speedup in samples/s over 1 rank (experiment ch05/dp_train)
# Re-run in the figures directory: gnuplot ch05_dp_train_speedup_weak.gp
# It reads ch05_dp_train_speedup_weak.dat and writes ch05_dp_train_speedup_weak.svg and ch05_dp_train_speedup_weak.png; restyle freely.
# note: Amdahl fit (ours, overlap=off): serial fraction f = 0.185, fitted on p <= 2, the core count of vm.
# note: Amdahl fit (ours, overlap=on): serial fraction f = 0.666, fitted on p <= 2, the core count of vm.
# note: Amdahl fit (pytorch_ddp, overlap=-): serial fraction f = 1, fitted on p <= 2, the core count of vm.
# note: Karp–Flatt serial fraction e(p) for ours, overlap=off: p=2: 0.185.
# note: Karp–Flatt serial fraction e(p) for ours, overlap=on: p=2: 0.666.
# note: Karp–Flatt serial fraction e(p) for pytorch_ddp, overlap=-: p=2: 2.36.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch05_dp_train_speedup_weak.svg'

set title "Weak scaling (64 rows per rank): speedup in samples/s over 1 rank" noenhanced
set xlabel "ranks" noenhanced
set ylabel "speedup (×)" noenhanced
set grid
set key inside bottom left box opaque noenhanced font ',9' spacing 0.95
set yrange [0:*]
set xtics (1, 2)
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

plot 'ch05_dp_train_speedup_weak.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "ours, overlap=-", \
     'ch05_dp_train_speedup_weak.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "ours, overlap=off", \
     'ch05_dp_train_speedup_weak.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "ours, overlap=on", \
     'ch05_dp_train_speedup_weak.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "pytorch_ddp, overlap=-", \
     'ch05_dp_train_speedup_weak.dat' index 4 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "ideal (S = p)", \
     'ch05_dp_train_speedup_weak.dat' index 5 using 1:2 with lines lt 2 dt 2 lw 1.5 title "Amdahl fit (ours, overlap=off): f = 0.185", \
     'ch05_dp_train_speedup_weak.dat' index 6 using 1:2 with lines lt 3 dt 2 lw 1.5 title "Amdahl fit (ours, overlap=on): f = 0.666", \
     'ch05_dp_train_speedup_weak.dat' index 7 using 1:2 with lines lt 4 dt 2 lw 1.5 title "Amdahl fit (pytorch_ddp, overlap=-): f = 1"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch05_dp_train_speedup_weak.png'
replot
unset output
