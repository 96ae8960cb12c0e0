# concurdl chart: Speedup over the sequential executor (experiment ch08/executors)
# Re-run in the figures directory: gnuplot ch08_executors_speedup.gp
# It reads ch08_executors_speedup.dat and writes ch08_executors_speedup.svg and ch08_executors_speedup.png; restyle freely.
# note: Amdahl fit (parallel): serial fraction f = 0.141, fitted on p <= 2, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (tbb_flow): serial fraction f = 0.14, fitted on p <= 2, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Karp–Flatt serial fraction e(p) for parallel: p=2: 0.141, p=4: 0.45.
# note: Karp–Flatt serial fraction e(p) for tbb_flow: p=2: 0.14, p=4: 0.429.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch08_executors_speedup.svg'

set title "Speedup over the sequential executor" noenhanced
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

plot 'ch08_executors_speedup.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "parallel", \
     'ch08_executors_speedup.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "tbb_flow", \
     'ch08_executors_speedup.dat' index 2 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "ideal (S = p)", \
     'ch08_executors_speedup.dat' index 3 using 1:2 with lines lt 1 dt 2 lw 1.5 title "Amdahl fit (parallel): f = 0.141", \
     'ch08_executors_speedup.dat' index 4 using 1:2 with lines lt 2 dt 2 lw 1.5 title "Amdahl fit (tbb_flow): f = 0.14"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch08_executors_speedup.png'
replot
unset output
