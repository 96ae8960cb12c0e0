# concurdl chart: Uncontended lock+unlock pairs/s, one thread (experiment ch02/lock_uncontended)
# Re-run in the figures directory: gnuplot ch02_lock_uncontended_rate.gp
# It reads ch02_lock_uncontended_rate.dat and writes ch02_lock_uncontended_rate.svg and ch02_lock_uncontended_rate.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch02_lock_uncontended_rate.svg'

set title "Uncontended lock+unlock pairs/s, one thread" noenhanced
set xlabel "variant" noenhanced
set ylabel "pairs/s (1e9 / rate = ns per pair)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 5 Left reverse noenhanced
set bmargin 4.5
set format y "%.1s%c"
set yrange [0:*]
set xtics ("v5_mcs" 0, "v3_ttas_backoff" 1, "v2_ttas" 2, "v4_ticket" 3, "v1_tas" 4, "std_mutex" 5) noenhanced
set xrange [-0.5:5.5]
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

plot 'ch02_lock_uncontended_rate.dat' index 0 using ($1+0.0000):2:(0.8) with boxes lt 1 title "threads=1", \
     'ch02_lock_uncontended_rate.dat' index 0 using ($1+0.0000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch02_lock_uncontended_rate.png'
replot
unset output
