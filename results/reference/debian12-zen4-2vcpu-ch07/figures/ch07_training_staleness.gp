# concurdl chart: Mean staleness of the gradients (updates between pull and push), epoch 1 (experiment ch07/training)
# Re-run in the figures directory: gnuplot ch07_training_staleness.gp
# It reads ch07_training_staleness.dat and writes ch07_training_staleness.svg and ch07_training_staleness.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch07_training_staleness.svg'

set title "Mean staleness of the gradients (updates between pull and push), epoch 1" noenhanced
set xlabel "workers" noenhanced
set ylabel "staleness_mean" noenhanced
set grid
set key inside top left box opaque noenhanced font ',9' spacing 0.95
set yrange [0:*]
set xtics (1, 2)
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

plot 'ch07_training_staleness.dat' index 0 using 1:2 with linespoints lt 1 lw 2 pt 7 ps 0.8 title "sync, straggler=-", \
     'ch07_training_staleness.dat' index 1 using 1:2 with linespoints lt 2 lw 2 pt 7 ps 0.8 title "sync, straggler=none", \
     'ch07_training_staleness.dat' index 2 using 1:2 with linespoints lt 3 lw 2 pt 7 ps 0.8 title "sync, straggler=4x", \
     'ch07_training_staleness.dat' index 3 using 1:2 with linespoints lt 4 lw 2 pt 7 ps 0.8 title "ps-async, straggler=-", \
     'ch07_training_staleness.dat' index 4 using 1:2 with linespoints lt 5 lw 2 pt 7 ps 0.8 title "ps-async, straggler=none", \
     'ch07_training_staleness.dat' index 5 using 1:2 with linespoints lt 6 lw 2 pt 7 ps 0.8 title "ps-async, straggler=4x", \
     'ch07_training_staleness.dat' index 6 using 1:2 with linespoints lt 7 lw 2 pt 7 ps 0.8 title "ps-ssp, straggler=-", \
     'ch07_training_staleness.dat' index 7 using 1:2:3:4 with yerrorlines lt 8 lw 2 pt 7 ps 0.8 title "ps-ssp, straggler=none", \
     'ch07_training_staleness.dat' index 8 using 1:2:3:4 with yerrorlines lt 9 lw 2 pt 7 ps 0.8 title "ps-ssp, straggler=4x", \
     'ch07_training_staleness.dat' index 9 using 1:2 with linespoints lt 10 lw 2 pt 7 ps 0.8 title "hogwild, straggler=-", \
     'ch07_training_staleness.dat' index 10 using 1:2:3:4 with yerrorlines lt 11 lw 2 pt 7 ps 0.8 title "hogwild, straggler=none", \
     'ch07_training_staleness.dat' index 11 using 1:2 with linespoints lt 12 lw 2 pt 7 ps 0.8 title "hogwild, straggler=4x", \
     'ch07_training_staleness.dat' index 12 using 1:2 with linespoints lt 13 lw 2 pt 5 ps 0.8 title "local-sgd, straggler=-", \
     'ch07_training_staleness.dat' index 13 using 1:2 with linespoints lt 14 lw 2 pt 5 ps 0.8 title "local-sgd, straggler=none", \
     'ch07_training_staleness.dat' index 14 using 1:2 with linespoints lt 15 lw 2 pt 5 ps 0.8 title "local-sgd, straggler=4x"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch07_training_staleness.png'
replot
unset output
