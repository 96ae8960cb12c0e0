# concurdl chart: Epoch time vs compute/io per batch, 50 us a read, beside the no-overlap and perfect-overlap models (experiment ch03/loader_epoch)
# Re-run in the figures directory: gnuplot ch03_loader_epoch_vs_compute.gp
# It reads ch03_loader_epoch_vs_compute.dat and writes ch03_loader_epoch_vs_compute.svg and ch03_loader_epoch_vs_compute.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch03_loader_epoch_vs_compute.svg'

set title "Epoch time vs compute/io per batch, 50 us a read, beside the no-overlap and perfect-overlap models" noenhanced
set xlabel "compute_ratio" noenhanced
set ylabel "epoch time (s)" noenhanced
set grid
set key inside top left box opaque noenhanced font ',9' spacing 0.95
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

plot 'ch03_loader_epoch_vs_compute.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "sync, workers=-", \
     'ch03_loader_epoch_vs_compute.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "prefetch, workers=-", \
     'ch03_loader_epoch_vs_compute.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "workers_unordered, workers=4", \
     'ch03_loader_epoch_vs_compute.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "workers_ordered, workers=4", \
     'ch03_loader_epoch_vs_compute.dat' index 4 using 1:2:3:4 with yerrorlines lt 5 lw 2 pt 7 ps 0.8 title "uring, workers=4", \
     'ch03_loader_epoch_vs_compute.dat' index 5 using 1:2 with linespoints lc rgb '#303030' dt 2 lw 2 pt 6 ps 0.7 title "model: io + compute (no overlap)", \
     'ch03_loader_epoch_vs_compute.dat' index 6 using 1:2 with linespoints lc rgb '#6a3d9a' dt 2 lw 2 pt 6 ps 0.7 title "model: max(io, compute) (perfect overlap)"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch03_loader_epoch_vs_compute.png'
replot
unset output
