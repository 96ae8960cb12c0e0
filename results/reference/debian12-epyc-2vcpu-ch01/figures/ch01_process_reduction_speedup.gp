# concurdl chart: Sum of n int32: speedup over one thread (experiment ch01/process_reduction)
# Re-run in the figures directory: gnuplot ch01_process_reduction_speedup.gp
# It reads ch01_process_reduction_speedup.dat and writes ch01_process_reduction_speedup.svg and ch01_process_reduction_speedup.png; restyle freely.
# note: Karp–Flatt serial fraction e(p) for threads: p=2: 0.152, p=4: 0.612, p=8: 0.621.
# note: Karp–Flatt serial fraction e(p) for fork_shared: p=2: 2.6, p=4: 2.72, p=8: 3.94.
# note: Karp–Flatt serial fraction e(p) for fork_pipes: p=2: 2.57, p=4: 3, p=8: 4.41.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch01_process_reduction_speedup.svg'

set title "Sum of n int32: speedup over one thread" noenhanced
set xlabel "workers" noenhanced
set ylabel "speedup (×)" noenhanced
set grid
set key inside top left box opaque noenhanced
set yrange [0:*]
set xtics (1, 2, 4, 8)
set offsets graph 0.02, graph 0.02, 0, 0

plot 'ch01_process_reduction_speedup.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "threads", \
     'ch01_process_reduction_speedup.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "fork_shared", \
     'ch01_process_reduction_speedup.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "fork_pipes", \
     'ch01_process_reduction_speedup.dat' index 3 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "ideal (S = p)"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_process_reduction_speedup.png'
replot
unset output
