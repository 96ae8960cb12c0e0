# concurdl chart: Histogram of produced items: items/s vs producer threads (experiment ch02/message_passing)
# Re-run in the figures directory: gnuplot ch02_message_passing_rate.gp
# It reads ch02_message_passing_rate.dat and writes ch02_message_passing_rate.svg and ch02_message_passing_rate.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch02_message_passing_rate.svg'

set title "Histogram of produced items: items/s vs producer threads" noenhanced
set xlabel "threads" noenhanced
set ylabel "items/s (log)" noenhanced
set grid
set key inside top right box opaque noenhanced
set logscale y
set format y "%.0s%c"
set xtics (1, 2, 4, 8, 16)
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

plot 'ch02_message_passing_rate.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "v1_shared_state", \
     'ch02_message_passing_rate.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "v2_channel", \
     'ch02_message_passing_rate.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "v3_channel_batched"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch02_message_passing_rate.png'
replot
unset output
