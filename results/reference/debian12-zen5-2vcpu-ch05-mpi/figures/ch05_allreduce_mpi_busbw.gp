# concurdl chart: All-reduce (MPI), out of place: bus bandwidth vs size (dashed: ping-pong bandwidth 1/beta) (experiment ch05/allreduce_mpi)
# Re-run in the figures directory: gnuplot ch05_allreduce_mpi_busbw.gp
# It reads ch05_allreduce_mpi_busbw.dat and writes ch05_allreduce_mpi_busbw.svg and ch05_allreduce_mpi_busbw.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch05_allreduce_mpi_busbw.svg'

set title "All-reduce (MPI), out of place: bus bandwidth vs size (dashed: ping-pong bandwidth 1/beta)" noenhanced
set xlabel "bytes per rank (log)" noenhanced
set ylabel "busbw = algbw x 2(n-1)/n (bytes/s, log)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 1 Left reverse noenhanced
set bmargin 19.2
set logscale x 10
set logscale y
set format x "%.0s%c"
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

plot 'ch05_allreduce_mpi_busbw.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "v1_naive, ranks=2", \
     'ch05_allreduce_mpi_busbw.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "v2_tree, ranks=2", \
     'ch05_allreduce_mpi_busbw.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "v3_halving_doubling, ranks=2", \
     'ch05_allreduce_mpi_busbw.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "v4_ring, ranks=2", \
     'ch05_allreduce_mpi_busbw.dat' index 4 using 1:2:3:4 with yerrorlines lt 5 lw 2 pt 7 ps 0.8 title "native, ranks=2", \
     'ch05_allreduce_mpi_busbw.dat' index 5 using 1:2:3:4 with yerrorlines lt 6 lw 2 pt 7 ps 0.8 title "gloo_ring, ranks=2", \
     'ch05_allreduce_mpi_busbw.dat' index 6 using 1:2:3:4 with yerrorlines lt 7 lw 2 pt 7 ps 0.8 title "gloo_ring_chunked, ranks=2", \
     'ch05_allreduce_mpi_busbw.dat' index 7 using 1:2:3:4 with yerrorlines lt 8 lw 2 pt 7 ps 0.8 title "v1_naive, ranks=4", \
     'ch05_allreduce_mpi_busbw.dat' index 8 using 1:2:3:4 with yerrorlines lt 9 lw 2 pt 7 ps 0.8 title "v2_tree, ranks=4", \
     'ch05_allreduce_mpi_busbw.dat' index 9 using 1:2:3:4 with yerrorlines lt 10 lw 2 pt 7 ps 0.8 title "v3_halving_doubling, ranks=4", \
     'ch05_allreduce_mpi_busbw.dat' index 10 using 1:2:3:4 with yerrorlines lt 11 lw 2 pt 7 ps 0.8 title "v4_ring, ranks=4", \
     'ch05_allreduce_mpi_busbw.dat' index 11 using 1:2:3:4 with yerrorlines lt 12 lw 2 pt 7 ps 0.8 title "native, ranks=4", \
     'ch05_allreduce_mpi_busbw.dat' index 12 using 1:2:3:4 with yerrorlines lt 13 lw 2 pt 5 ps 0.8 title "gloo_ring, ranks=4", \
     'ch05_allreduce_mpi_busbw.dat' index 13 using 1:2:3:4 with yerrorlines lt 14 lw 2 pt 5 ps 0.8 title "gloo_ring_chunked, ranks=4", \
     'ch05_allreduce_mpi_busbw.dat' index 14 using 1:2 with linespoints lc rgb '#303030' dt 2 lw 2 pt 6 ps 0.7 title "model: 1/beta of calibrate/rank_pingpong (one message between two ranks)"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch05_allreduce_mpi_busbw.png'
replot
unset output
