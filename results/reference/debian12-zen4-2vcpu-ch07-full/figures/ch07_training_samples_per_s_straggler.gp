# concurdl chart: Training samples/s against workers, the last worker 4x slower (experiment ch07/training)
# Re-run in the figures directory: gnuplot ch07_training_samples_per_s_straggler.gp
# It reads ch07_training_samples_per_s_straggler.dat and writes ch07_training_samples_per_s_straggler.svg and ch07_training_samples_per_s_straggler.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch07_training_samples_per_s_straggler.svg'

set title "Training samples/s against workers, the last worker 4x slower" noenhanced
set xlabel "workers" noenhanced
set ylabel "training samples/s" noenhanced
set grid
set key inside top right box opaque noenhanced
set format y "%.1s%c"
set yrange [0:*]
set xtics (2)
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

plot 'ch07_training_samples_per_s_straggler.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "sync", \
     'ch07_training_samples_per_s_straggler.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "ps-async", \
     'ch07_training_samples_per_s_straggler.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "ps-ssp", \
     'ch07_training_samples_per_s_straggler.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "hogwild", \
     'ch07_training_samples_per_s_straggler.dat' index 4 using 1:2:3:4 with yerrorlines lt 5 lw 2 pt 7 ps 0.8 title "local-sgd"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch07_training_samples_per_s_straggler.png'
replot
unset output
