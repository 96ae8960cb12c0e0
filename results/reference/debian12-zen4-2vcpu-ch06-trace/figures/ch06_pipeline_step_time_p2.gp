# concurdl chart: Step time against micro-batches, 2 stages (experiment ch06/pipeline)
# Re-run in the figures directory: gnuplot ch06_pipeline_step_time_p2.gp
# It reads ch06_pipeline_step_time_p2.dat and writes ch06_pipeline_step_time_p2.svg and ch06_pipeline_step_time_p2.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch06_pipeline_step_time_p2.svg'

set title "Step time against micro-batches, 2 stages" noenhanced
set xlabel "micro-batches m (log)" noenhanced
set ylabel "time per training step (s)" noenhanced
set grid
set key inside top right box opaque noenhanced
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

plot 'ch06_pipeline_step_time_p2.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "naive", \
     'ch06_pipeline_step_time_p2.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "gpipe", \
     'ch06_pipeline_step_time_p2.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "1f1b"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch06_pipeline_step_time_p2.png'
replot
unset output
