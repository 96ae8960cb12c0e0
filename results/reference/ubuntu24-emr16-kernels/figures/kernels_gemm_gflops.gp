# concurdl chart: GEMM v1-v4: FLOP/s vs n (square, float, all cores) (experiment kernels/gemm)
# Re-run in the figures directory: gnuplot kernels_gemm_gflops.gp
# It reads kernels_gemm_gflops.dat and writes kernels_gemm_gflops.svg and kernels_gemm_gflops.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'kernels_gemm_gflops.svg'

set title "GEMM v1-v4: FLOP/s vs n (square, float, all cores)" noenhanced
set xlabel "n" noenhanced
set ylabel "FLOP/s (log)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 4 Left reverse noenhanced
set bmargin 5.6
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

plot 'kernels_gemm_gflops.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "v1_naive", \
     'kernels_gemm_gflops.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "v2_ikj", \
     'kernels_gemm_gflops.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "v3_blocked", \
     'kernels_gemm_gflops.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "v4_register", \
     'kernels_gemm_gflops.dat' index 4 using 1:2:3:4 with yerrorlines lt 5 lw 2 pt 7 ps 0.8 title "openblas"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'kernels_gemm_gflops.png'
replot
unset output
