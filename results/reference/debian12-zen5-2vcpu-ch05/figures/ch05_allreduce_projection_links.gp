# concurdl chart: All-reduce of 64 MiB: ring measured (threads), models on other links to 1024 ranks (experiment ch05/allreduce)
# Re-run in the figures directory: gnuplot ch05_allreduce_projection_links.gp
# It reads ch05_allreduce_projection_links.dat and writes ch05_allreduce_projection_links.svg and ch05_allreduce_projection_links.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch05_allreduce_projection_links.svg'

set title "All-reduce of 64 MiB: ring measured (threads), models on other links to 1024 ranks" noenhanced
set xlabel "ranks (log; past the measured ones: model only)" noenhanced
set ylabel "time per all-reduce (s, log)" noenhanced
set grid
set key inside top right box opaque noenhanced font ',9' spacing 0.95
set logscale x 2
set logscale y
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

plot 'ch05_allreduce_projection_links.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "v4_ring", \
     'ch05_allreduce_projection_links.dat' index 1 using 1:2 with linespoints lt 1 dt 2 lw 2 pt 6 ps 0.7 title "model: v4_ring on 25 GB/s, alpha 2 us", \
     'ch05_allreduce_projection_links.dat' index 2 using 1:2 with linespoints lt 1 dt 4 lw 2 pt 6 ps 0.7 title "model: v3_halving_doubling on 25 GB/s, alpha 2 us", \
     'ch05_allreduce_projection_links.dat' index 3 using 1:2 with linespoints lt 1 dt 5 lw 2 pt 6 ps 0.7 title "model: v2_tree on 25 GB/s, alpha 2 us", \
     'ch05_allreduce_projection_links.dat' index 4 using 1:2 with linespoints lt 1 dt 2 lw 2 pt 6 ps 0.7 title "model: v4_ring on 100 Gb/s Ethernet, alpha 20 us", \
     'ch05_allreduce_projection_links.dat' index 5 using 1:2 with linespoints lt 1 dt 4 lw 2 pt 6 ps 0.7 title "model: v3_halving_doubling on 100 Gb/s Ethernet, alpha 20 us", \
     'ch05_allreduce_projection_links.dat' index 6 using 1:2 with linespoints lt 1 dt 5 lw 2 pt 6 ps 0.7 title "model: v2_tree on 100 Gb/s Ethernet, alpha 20 us"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch05_allreduce_projection_links.png'
replot
unset output
