# concurdl chart: Overlap efficiency per loader (1 = I/O completely hidden) (experiment ch03/loader_epoch)
# Re-run in the figures directory: gnuplot ch03_loader_epoch_overlap.gp
# It reads ch03_loader_epoch_overlap.dat and writes ch03_loader_epoch_overlap.svg and ch03_loader_epoch_overlap.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch03_loader_epoch_overlap.svg'

set title "Overlap efficiency per loader (1 = I/O completely hidden)" noenhanced
set xlabel "loader" noenhanced
set ylabel "overlap efficiency" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 2 Left reverse noenhanced
set bmargin 6.7
set xtics ("sync" 0, "prefetch" 1, "workers_unordered" 2, "workers_ordered" 3, "uring" 4) noenhanced
set xrange [-0.5:4.5]
set style fill solid 0.75 border -1
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

plot 'ch03_loader_epoch_overlap.dat' index 0 using ($1-0.3333):2:(0.1333333333) with boxes lt 1 title "compute_ratio=0.5, workers=-", \
     'ch03_loader_epoch_overlap.dat' index 0 using ($1-0.3333):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch03_loader_epoch_overlap.dat' index 1 using ($1-0.2000):2:(0.1333333333) with boxes lt 2 title "compute_ratio=1, workers=-", \
     'ch03_loader_epoch_overlap.dat' index 1 using ($1-0.2000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch03_loader_epoch_overlap.dat' index 2 using ($1-0.0667):2:(0.1333333333) with boxes lt 3 title "compute_ratio=2, workers=-", \
     'ch03_loader_epoch_overlap.dat' index 2 using ($1-0.0667):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch03_loader_epoch_overlap.dat' index 3 using ($1+0.0667):2:(0.1333333333) with boxes lt 4 title "compute_ratio=0.5, workers=4", \
     'ch03_loader_epoch_overlap.dat' index 3 using ($1+0.0667):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch03_loader_epoch_overlap.dat' index 4 using ($1+0.2000):2:(0.1333333333) with boxes lt 5 title "compute_ratio=1, workers=4", \
     'ch03_loader_epoch_overlap.dat' index 4 using ($1+0.2000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch03_loader_epoch_overlap.dat' index 5 using ($1+0.3333):2:(0.1333333333) with boxes lt 6 title "compute_ratio=2, workers=4", \
     'ch03_loader_epoch_overlap.dat' index 5 using ($1+0.3333):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch03_loader_epoch_overlap.png'
replot
unset output
