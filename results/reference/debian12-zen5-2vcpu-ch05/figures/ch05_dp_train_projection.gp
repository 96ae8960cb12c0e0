# concurdl chart: Weak scaling (64 rows per rank): measured, and ring all-reduce models to 1024 workers (experiment ch05/dp_train)
# Re-run in the figures directory: gnuplot ch05_dp_train_projection.gp
# It reads ch05_dp_train_projection.dat and writes ch05_dp_train_projection.svg and ch05_dp_train_projection.png; restyle freely.
# note: model: ring all-reduce on 25 GB/s, alpha 2 us, after backward: one worker's step t1 = 636 us (64 rows / its samples/s; forward and backward, step_compute_s, are 613 us of it); gradient 235146 floats = 940584 bytes; ring all-reduce t_ar(p) = 2(p-1) alpha + 2(p-1)/p bytes beta; samples/s = 64p / step, step = t1 + t_ar(p) after backward, max(t1, t_ar(p)) perfectly overlapped; without communication, 1024 workers would train 103M samples/s. p = 2: t_ar 41.6 us, 189K samples/s; p = 64: t_ar 326 us, 4.26M samples/s; p = 1024: t_ar 4.17 ms, 13.6M samples/s
# note: model: ring all-reduce on 25 GB/s, alpha 2 us, perfectly overlapped: p = 2: t_ar 41.6 us, 201K samples/s; p = 64: t_ar 326 us, 6.44M samples/s; p = 1024: t_ar 4.17 ms, 15.7M samples/s
# note: model: ring all-reduce on 100 Gb/s Ethernet, alpha 20 us, after backward: p = 2: t_ar 115 us, 170K samples/s; p = 64: t_ar 2.67 ms, 1.24M samples/s; p = 1024: t_ar 41.1 ms, 1.57M samples/s
# note: model: ring all-reduce on 100 Gb/s Ethernet, alpha 20 us, perfectly overlapped: p = 2: t_ar 115 us, 201K samples/s; p = 64: t_ar 2.67 ms, 1.54M samples/s; p = 1024: t_ar 41.1 ms, 1.6M samples/s

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch05_dp_train_projection.svg'

set title "Weak scaling (64 rows per rank): measured, and ring all-reduce models to 1024 workers" noenhanced
set xlabel "workers (log; past the measured ones: model only)" noenhanced
set ylabel "training samples/s (log)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 1 Left reverse noenhanced
set bmargin 10.8
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

plot 'ch05_dp_train_projection.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "ours, overlap=-", \
     'ch05_dp_train_projection.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "ours, overlap=off", \
     'ch05_dp_train_projection.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "ours, overlap=on", \
     'ch05_dp_train_projection.dat' index 3 using 1:2 with linespoints lc rgb '#303030' dt 2 lw 2 pt 6 ps 0.7 title "model: ring all-reduce on 25 GB/s, alpha 2 us, after backward", \
     'ch05_dp_train_projection.dat' index 4 using 1:2 with linespoints lc rgb '#6a3d9a' dt 2 lw 2 pt 6 ps 0.7 title "model: ring all-reduce on 25 GB/s, alpha 2 us, perfectly overlapped", \
     'ch05_dp_train_projection.dat' index 5 using 1:2 with linespoints lc rgb '#b15928' dt 2 lw 2 pt 6 ps 0.7 title "model: ring all-reduce on 100 Gb/s Ethernet, alpha 20 us, after backward", \
     'ch05_dp_train_projection.dat' index 6 using 1:2 with linespoints lc rgb '#1b7837' dt 2 lw 2 pt 6 ps 0.7 title "model: ring all-reduce on 100 Gb/s Ethernet, alpha 20 us, perfectly overlapped"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch05_dp_train_projection.png'
replot
unset output
