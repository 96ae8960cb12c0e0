# concurdl chart: One-way message time between two ranks, with the alpha-beta model (experiment calibrate/rank_pingpong)
# Re-run in the figures directory: gnuplot calibrate_rank_pingpong_one_way.gp
# It reads calibrate_rank_pingpong_one_way.dat and writes calibrate_rank_pingpong_one_way.svg and calibrate_rank_pingpong_one_way.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'calibrate_rank_pingpong_one_way.svg'

set title "One-way message time between two ranks, with the alpha-beta model" noenhanced
set xlabel "message size (bytes, log)" noenhanced
set ylabel "one-way time (s, log)" noenhanced
set grid
set key inside top left box opaque noenhanced
set logscale x 10
set logscale y
set format x "%.0s%c"
set format y "%.0s%c"
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

plot 'calibrate_rank_pingpong_one_way.dat' index 0 using 1:2 with linespoints lt 1 lw 2 pt 7 ps 0.8 title "ranks=2", \
     'calibrate_rank_pingpong_one_way.dat' index 1 using 1:2 with linespoints lc rgb '#303030' dt 2 lw 2 pt 6 ps 0.7 title "model: alpha + beta * bytes"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'calibrate_rank_pingpong_one_way.png'
replot
unset output
