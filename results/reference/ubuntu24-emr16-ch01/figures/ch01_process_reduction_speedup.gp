# concurdl chart: Sum of n int32: speedup over one thread (experiment ch01/process_reduction)
# Re-run in the figures directory: gnuplot ch01_process_reduction_speedup.gp
# It reads ch01_process_reduction_speedup.dat and writes ch01_process_reduction_speedup.svg and ch01_process_reduction_speedup.png; restyle freely.
# note: Karp–Flatt serial fraction e(p) for threads: p=2: 0.129, p=4: 0.0731, p=8: 0.126, p=16: 0.225, p=32: 0.484.
# note: Karp–Flatt serial fraction e(p) for fork_shared: p=2: 2.69, p=4: 2.17, p=8: 3.13, p=16: 5.03, p=32: 8.82.
# note: Karp–Flatt serial fraction e(p) for fork_pipes: p=2: 2.66, p=4: 2.14, p=8: 2.38, p=16: 4.03, p=32: 7.39.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch01_process_reduction_speedup.svg'

set title "Sum of n int32: speedup over one thread" noenhanced
set xlabel "workers" noenhanced
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

plot 'ch01_process_reduction_speedup.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "threads", \
     'ch01_process_reduction_speedup.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "fork_shared", \
     'ch01_process_reduction_speedup.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "fork_pipes", \
     'ch01_process_reduction_speedup.dat' index 3 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "ideal (S = p)"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_process_reduction_speedup.png'
replot
unset output
