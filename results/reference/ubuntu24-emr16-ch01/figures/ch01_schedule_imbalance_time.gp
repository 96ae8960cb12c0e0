# concurdl chart: Mandelbrot rows: time per image (experiment ch01/schedule_imbalance)
# Re-run in the figures directory: gnuplot ch01_schedule_imbalance_time.gp
# It reads ch01_schedule_imbalance_time.dat and writes ch01_schedule_imbalance_time.svg and ch01_schedule_imbalance_time.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch01_schedule_imbalance_time.svg'

set title "Mandelbrot rows: time per image" noenhanced
set xlabel "variant" noenhanced
set ylabel "time (s)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 5 Left reverse noenhanced
set bmargin 5.6
set yrange [0:*]
set xtics ("omp_static" 0, "omp_static_chunk1" 1, "omp_dynamic" 2, "omp_guided" 3, "pool_static_blocks" 4, "pool_dynamic_rows" 5) noenhanced rotate by -30 left
set bmargin 7
set xrange [-0.5:5.5]
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

plot 'ch01_schedule_imbalance_time.dat' index 0 using ($1-0.3333):2:(0.1333333333) with boxes lt 1 title "threads=1", \
     'ch01_schedule_imbalance_time.dat' index 0 using ($1-0.3333):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch01_schedule_imbalance_time.dat' index 1 using ($1-0.2000):2:(0.1333333333) with boxes lt 2 title "threads=2", \
     'ch01_schedule_imbalance_time.dat' index 1 using ($1-0.2000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch01_schedule_imbalance_time.dat' index 2 using ($1-0.0667):2:(0.1333333333) with boxes lt 3 title "threads=4", \
     'ch01_schedule_imbalance_time.dat' index 2 using ($1-0.0667):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch01_schedule_imbalance_time.dat' index 3 using ($1+0.0667):2:(0.1333333333) with boxes lt 4 title "threads=8", \
     'ch01_schedule_imbalance_time.dat' index 3 using ($1+0.0667):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch01_schedule_imbalance_time.dat' index 4 using ($1+0.2000):2:(0.1333333333) with boxes lt 5 title "threads=16", \
     'ch01_schedule_imbalance_time.dat' index 4 using ($1+0.2000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch01_schedule_imbalance_time.dat' index 5 using ($1+0.3333):2:(0.1333333333) with boxes lt 6 title "threads=32", \
     'ch01_schedule_imbalance_time.dat' index 5 using ($1+0.3333):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch01_schedule_imbalance_time.png'
replot
unset output
