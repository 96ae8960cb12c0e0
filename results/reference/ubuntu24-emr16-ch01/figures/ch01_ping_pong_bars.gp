# concurdl chart: Ping-pong: time per round trip (experiment ch01/ping_pong)
# Re-run in the figures directory: gnuplot ch01_ping_pong_bars.gp
# It reads ch01_ping_pong_bars.dat and writes ch01_ping_pong_bars.svg and ch01_ping_pong_bars.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch01_ping_pong_bars.svg'

set title "Ping-pong: time per round trip" noenhanced
set xlabel "variant" noenhanced
set ylabel "seconds per round trip (log)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 3 Left reverse noenhanced
set bmargin 4.5
set logscale y
set format y "%.0s%c"
set xtics ("condvar" 0, "atomic_wait" 1, "atomic_spin" 2, "pipe_threads" 3, "pipe_processes" 4) noenhanced
set xrange [-0.5:4.5]
set style fill solid 0.75 border -1
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

plot 'ch01_ping_pong_bars.dat' index 0 using ($1+0.0000):2:(0.8) with boxes lt 1 title "round_trips=2000", \
     'ch01_ping_pong_bars.dat' index 0 using ($1+0.0000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_ping_pong_bars.png'
replot
unset output
