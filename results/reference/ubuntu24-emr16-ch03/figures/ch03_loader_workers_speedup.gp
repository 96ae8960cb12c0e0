# concurdl chart: Loader speedup vs workers: latency-bound I/O scales past the cores (experiment ch03/loader_workers)
# Re-run in the figures directory: gnuplot ch03_loader_workers_speedup.gp
# It reads ch03_loader_workers_speedup.dat and writes ch03_loader_workers_speedup.svg and ch03_loader_workers_speedup.png; restyle freely.
# note: Karp–Flatt serial fraction e(p) for workers_unordered: p=2: 0.0237, p=4: 0.013, p=8: 0.0143.
# note: Karp–Flatt serial fraction e(p) for workers_ordered: p=2: 0.0194, p=4: 0.0107, p=8: 0.0131.
# note: Karp–Flatt serial fraction e(p) for uring: p=2: 0.0221, p=4: 0.0193, p=8: 0.0204.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch03_loader_workers_speedup.svg'

set title "Loader speedup vs workers: latency-bound I/O scales past the cores" noenhanced
set xlabel "workers" noenhanced
set ylabel "speedup (×)" noenhanced
set grid
set key inside top left box opaque noenhanced
set yrange [0:*]
set xtics (1, 2, 4, 8)
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

plot 'ch03_loader_workers_speedup.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "workers_unordered", \
     'ch03_loader_workers_speedup.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "workers_ordered", \
     'ch03_loader_workers_speedup.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "uring", \
     'ch03_loader_workers_speedup.dat' index 3 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "ideal (S = p)"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch03_loader_workers_speedup.png'
replot
unset output
