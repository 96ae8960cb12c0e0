# concurdl chart: Bubble fraction against micro-batches, 4 stages (experiment ch06/pipeline)
# Re-run in the figures directory: gnuplot ch06_pipeline_bubble_p4.gp
# It reads ch06_pipeline_bubble_p4.dat and writes ch06_pipeline_bubble_p4.svg and ch06_pipeline_bubble_p4.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch06_pipeline_bubble_p4.svg'

set title "Bubble fraction against micro-batches, 4 stages" noenhanced
set xlabel "micro-batches m (log)" noenhanced
set ylabel "bubble fraction (measured)" noenhanced
set grid
set key inside bottom left box opaque noenhanced
set logscale x 2
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

plot 'ch06_pipeline_bubble_p4.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "naive", \
     'ch06_pipeline_bubble_p4.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "gpipe", \
     'ch06_pipeline_bubble_p4.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "1f1b", \
     'ch06_pipeline_bubble_p4.dat' index 3 using 1:2 with linespoints lt 2 dt 2 lw 2 pt 6 ps 0.7 title "model: GPipe and 1F1B: (p-1)/(m+p-1)", \
     'ch06_pipeline_bubble_p4.dat' index 4 using 1:2 with linespoints lt 1 dt 2 lw 2 pt 6 ps 0.7 title "model: naive: (p-1)/p"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch06_pipeline_bubble_p4.png'
replot
unset output
