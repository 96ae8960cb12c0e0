# concurdl chart: Cost of creating and joining one worker (experiment ch01/spawn_cost)
# Re-run in the figures directory: gnuplot ch01_spawn_cost_bars.gp
# It reads ch01_spawn_cost_bars.dat and writes ch01_spawn_cost_bars.svg and ch01_spawn_cost_bars.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch01_spawn_cost_bars.svg'

set title "Cost of creating and joining one worker" noenhanced
set xlabel "variant" noenhanced
set ylabel "seconds per spawn (log)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 4 Left reverse noenhanced
set bmargin 4.5
set logscale y
set format y "%.0s%c"
set xtics ("std_thread" 0, "fork_waitpid" 1, "fork_exec_true" 2, "posix_spawn_true" 3) noenhanced
set xrange [-0.5:3.5]
set style fill solid 0.75 border -1

plot 'ch01_spawn_cost_bars.dat' index 0 using ($1-0.2000):2:(0.4) with boxes lt 1 title "parent_mib=0", \
     'ch01_spawn_cost_bars.dat' index 0 using ($1-0.2000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch01_spawn_cost_bars.dat' index 1 using ($1+0.2000):2:(0.4) with boxes lt 2 title "parent_mib=256", \
     'ch01_spawn_cost_bars.dat' index 1 using ($1+0.2000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_spawn_cost_bars.png'
replot
unset output
