# concurdl chart: 128 ops: time against the front end's own cost per op (experiment ch08/async_frontend)
# Re-run in the figures directory: gnuplot ch08_async_frontend_time.gp
# It reads ch08_async_frontend_time.dat and writes ch08_async_frontend_time.svg and ch08_async_frontend_time.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch08_async_frontend_time.svg'

set title "128 ops: time against the front end's own cost per op" noenhanced
set xlabel "front end's own time per op, o (µs)" noenhanced
set ylabel "time for the chain (s)" noenhanced
set grid
set key inside top left box opaque noenhanced
set format y "%.1s%c"
set yrange [0:*]
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

plot 'ch08_async_frontend_time.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "eager", \
     'ch08_async_frontend_time.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "async", \
     'ch08_async_frontend_time.dat' index 2 using 1:2 with linespoints lt 1 dt 2 lw 2 pt 6 ps 0.7 title "model: eager: T(o=0) + N o", \
     'ch08_async_frontend_time.dat' index 3 using 1:2 with linespoints lt 2 dt 2 lw 2 pt 6 ps 0.7 title "model: async: max(T(o=0), N o)"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch08_async_frontend_time.png'
replot
unset output
