# concurdl chart: Outcomes sequential consistency forbids, per million trials (experiment ch02/litmus)
# Re-run in the figures directory: gnuplot ch02_litmus_forbidden.gp
# It reads ch02_litmus_forbidden.dat and writes ch02_litmus_forbidden.svg and ch02_litmus_forbidden.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch02_litmus_forbidden.svg'

set title "Outcomes sequential consistency forbids, per million trials" noenhanced
set xlabel "order" noenhanced
set ylabel "forbidden outcomes per million trials" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 3 Left reverse noenhanced
set bmargin 4.5
set format y "%.1s%c"
set yrange [0:*]
set xtics ("relaxed" 0, "acq_rel" 1, "seq_cst" 2) noenhanced
set xrange [-0.5:2.5]
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

plot 'ch02_litmus_forbidden.dat' index 0 using ($1-0.2000):2:(0.4) with boxes lt 1 title "store_buffering", \
     'ch02_litmus_forbidden.dat' index 0 using ($1-0.2000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch02_litmus_forbidden.dat' index 1 using ($1+0.2000):2:(0.4) with boxes lt 2 title "message_passing"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch02_litmus_forbidden.png'
replot
unset output
