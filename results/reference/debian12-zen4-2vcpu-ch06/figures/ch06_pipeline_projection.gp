# concurdl chart: 1F1B step time against stages, m = 16, measured and projected (alpha-beta) (experiment ch06/pipeline)
# Re-run in the figures directory: gnuplot ch06_pipeline_projection.gp
# It reads ch06_pipeline_projection.dat and writes ch06_pipeline_projection.svg and ch06_pipeline_projection.png; restyle freely.
# note: model: 1F1B, m = 16, projected: 25 GB/s, alpha 2 us: projection: step(p) = t1/p x (m+p-1)/m + 2(m+p-1)(alpha + micro-batch activations x beta), t1 = 0.05388 s (1 stage, 1F1B, m = 16, measured); links as chapter 05's; a model, not a measurement
# note: model: 1F1B, m = 16, projected: 100 Gb/s Ethernet, alpha 20 us: projection: step(p) = t1/p x (m+p-1)/m + 2(m+p-1)(alpha + micro-batch activations x beta), t1 = 0.05388 s (1 stage, 1F1B, m = 16, measured); links as chapter 05's; a model, not a measurement

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch06_pipeline_projection.svg'

set title "1F1B step time against stages, m = 16, measured and projected (alpha-beta)" noenhanced
set xlabel "stages p (log)" noenhanced
set ylabel "time per training step (s, log)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 1 Left reverse noenhanced
set bmargin 6.7
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

plot 'ch06_pipeline_projection.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "1f1b", \
     'ch06_pipeline_projection.dat' index 1 using 1:2 with linespoints lc rgb '#303030' dt 2 lw 2 pt 6 ps 0.7 title "model: 1F1B, m = 16, projected: 25 GB/s, alpha 2 us", \
     'ch06_pipeline_projection.dat' index 2 using 1:2 with linespoints lc rgb '#6a3d9a' dt 2 lw 2 pt 6 ps 0.7 title "model: 1F1B, m = 16, projected: 100 Gb/s Ethernet, alpha 20 us"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch06_pipeline_projection.png'
replot
unset output
