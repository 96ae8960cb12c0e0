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

plot 'ch01_ping_pong_bars.dat' index 0 using ($1+0.0000):2:(0.8) with boxes lt 1 title "round_trips=2000", \
     'ch01_ping_pong_bars.dat' index 0 using ($1+0.0000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_ping_pong_bars.png'
replot
unset output
