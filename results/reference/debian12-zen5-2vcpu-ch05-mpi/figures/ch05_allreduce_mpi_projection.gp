# concurdl chart: All-reduce of 64 MiB (MPI): measured, and alpha-beta models fitted here, to 1024 ranks (experiment ch05/allreduce_mpi)
# Re-run in the figures directory: gnuplot ch05_allreduce_mpi_projection.gp
# It reads ch05_allreduce_mpi_projection.dat and writes ch05_allreduce_mpi_projection.svg and ch05_allreduce_mpi_projection.png; restyle freely.
# note: model: v1_naive, alpha-beta fitted here: fits of time = a + b * bytes (out of place; the line through the smallest and the largest size, so a is the latency regime's and b the bandwidth regime's): gloo_ring at 2 ranks: 578 us + bytes / (1.63 GB/s); gloo_ring at 4 ranks: 702 us + bytes / (0.302 GB/s); gloo_ring_chunked at 2 ranks: 814 us + bytes / (1.82 GB/s); gloo_ring_chunked at 4 ranks: 4.39e+03 us + bytes / (0.7 GB/s); native at 2 ranks: 0.151 us + bytes / (2.42 GB/s); native at 4 ranks: 15.2 us + bytes / (0.859 GB/s); v1_naive at 2 ranks: 10.1 us + bytes / (2.75 GB/s); v1_naive at 4 ranks: 24.1 us + bytes / (0.919 GB/s); v2_tree at 2 ranks: 9.96 us + bytes / (2.75 GB/s); v2_tree at 4 ranks: 17.8 us + bytes / (1.17 GB/s); v3_halving_doubling at 2 ranks: 4.66 us + bytes / (3.79 GB/s); v3_halving_doubling at 4 ranks: 15.9 us + bytes / (1.25 GB/s); v4_ring at 2 ranks: 1.21 us + bytes / (4.41 GB/s); v4_ring at 4 ranks: 17.1 us + bytes / (1.38 GB/s). link implied by the fit at 2 ranks: alpha = 5.06 us, 1/beta = 5.51 GB/s
# note: model: v2_tree, alpha-beta fitted here: link implied by the fit at 2 ranks: alpha = 4.98 us, 1/beta = 5.49 GB/s
# note: model: v3_halving_doubling, alpha-beta fitted here: link implied by the fit at 2 ranks: alpha = 2.33 us, 1/beta = 3.79 GB/s
# note: model: v4_ring, alpha-beta fitted here: link implied by the fit at 2 ranks: alpha = 0.603 us, 1/beta = 4.41 GB/s

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch05_allreduce_mpi_projection.svg'

set title "All-reduce of 64 MiB (MPI): measured, and alpha-beta models fitted here, to 1024 ranks" noenhanced
set xlabel "ranks (log; past the measured ones: model only)" noenhanced
set ylabel "time per all-reduce (s, log)" noenhanced
set grid
set key inside top left box opaque noenhanced font ',9' spacing 0.95
set logscale x 2
set logscale y
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

plot 'ch05_allreduce_mpi_projection.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "v1_naive", \
     'ch05_allreduce_mpi_projection.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "v2_tree", \
     'ch05_allreduce_mpi_projection.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "v3_halving_doubling", \
     'ch05_allreduce_mpi_projection.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "v4_ring", \
     'ch05_allreduce_mpi_projection.dat' index 4 using 1:2:3:4 with yerrorlines lt 5 lw 2 pt 7 ps 0.8 title "native", \
     'ch05_allreduce_mpi_projection.dat' index 5 using 1:2:3:4 with yerrorlines lt 6 lw 2 pt 7 ps 0.8 title "gloo_ring", \
     'ch05_allreduce_mpi_projection.dat' index 6 using 1:2:3:4 with yerrorlines lt 7 lw 2 pt 7 ps 0.8 title "gloo_ring_chunked", \
     'ch05_allreduce_mpi_projection.dat' index 7 using 1:2 with linespoints lt 1 dt 2 lw 2 pt 6 ps 0.7 title "model: v1_naive, alpha-beta fitted here", \
     'ch05_allreduce_mpi_projection.dat' index 8 using 1:2 with linespoints lt 2 dt 2 lw 2 pt 6 ps 0.7 title "model: v2_tree, alpha-beta fitted here", \
     'ch05_allreduce_mpi_projection.dat' index 9 using 1:2 with linespoints lt 3 dt 2 lw 2 pt 6 ps 0.7 title "model: v3_halving_doubling, alpha-beta fitted here", \
     'ch05_allreduce_mpi_projection.dat' index 10 using 1:2 with linespoints lt 4 dt 2 lw 2 pt 6 ps 0.7 title "model: v4_ring, alpha-beta fitted here"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch05_allreduce_mpi_projection.png'
replot
unset output
