# concurdl chart: Activations a stage holds at once, 4 stages: GPipe keeps m, 1F1B at most p (experiment ch06/pipeline)
# Re-run in the figures directory: gnuplot ch06_pipeline_activations.gp
# It reads ch06_pipeline_activations.dat and writes ch06_pipeline_activations.svg and ch06_pipeline_activations.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch06_pipeline_activations.svg'

set title "Activations a stage holds at once, 4 stages: GPipe keeps m, 1F1B at most p" noenhanced
set xlabel "micro-batches m (log)" noenhanced
set ylabel "micro-batches' activations held (largest stage)" noenhanced
set grid
set key inside top left box opaque noenhanced
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

plot 'ch06_pipeline_activations.dat' index 0 using 1:2 with linespoints lt 1 lw 2 pt 7 ps 0.8 title "naive", \
     'ch06_pipeline_activations.dat' index 1 using 1:2 with linespoints lt 2 lw 2 pt 7 ps 0.8 title "gpipe", \
     'ch06_pipeline_activations.dat' index 2 using 1:2 with linespoints lt 3 lw 2 pt 7 ps 0.8 title "1f1b"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch06_pipeline_activations.png'
replot
unset output
