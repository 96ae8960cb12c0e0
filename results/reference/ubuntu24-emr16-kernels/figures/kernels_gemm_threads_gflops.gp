# concurdl chart: GEMM: FLOP/s vs threads (experiment kernels/gemm_threads)
# Re-run in the figures directory: gnuplot kernels_gemm_threads_gflops.gp
# It reads kernels_gemm_threads_gflops.dat and writes kernels_gemm_threads_gflops.svg and kernels_gemm_threads_gflops.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'kernels_gemm_threads_gflops.svg'

set title "GEMM: FLOP/s vs threads" noenhanced
set xlabel "threads" noenhanced
set ylabel "FLOP/s" noenhanced
set grid
set key inside top left box opaque noenhanced
set logscale x 2
set format y "%.1s%c"
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

plot 'kernels_gemm_threads_gflops.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "v4_register", \
     'kernels_gemm_threads_gflops.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "openblas", \
     'kernels_gemm_threads_gflops.dat' index 2 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "measured peak FLOP/s, all cores (calibrate)"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'kernels_gemm_threads_gflops.png'
replot
unset output
