# concurdl chart: Bytes moved per second against chain length (experiment ch08/fusion)
# Re-run in the figures directory: gnuplot ch08_fusion_bandwidth.gp
# It reads ch08_fusion_bandwidth.dat and writes ch08_fusion_bandwidth.svg and ch08_fusion_bandwidth.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch08_fusion_bandwidth.svg'

set title "Bytes moved per second against chain length" noenhanced
set xlabel "ops in the chain k (log)" noenhanced
set ylabel "bytes/s (declared traffic / time)" noenhanced
set grid
set key inside bottom right box opaque noenhanced
set logscale x 2
set format y "%.1s%c"
set yrange [0:*]
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

plot 'ch08_fusion_bandwidth.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "unfused", \
     'ch08_fusion_bandwidth.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "fused"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch08_fusion_bandwidth.png'
replot
unset output
