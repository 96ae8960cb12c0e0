# concurdl chart: A training step by phase, GEMM v4, the update a pass of its own (s per step of 64 samples) (experiment kernels/train_breakdown)
# Re-run in the figures directory: gnuplot kernels_train_breakdown_phases_v4_separate.gp
# It reads kernels_train_breakdown_phases_v4_separate.dat and writes kernels_train_breakdown_phases_v4_separate.svg and kernels_train_breakdown_phases_v4_separate.png; restyle freely.
# note: Stacked: each box is one series' median, stacked from the bottom up in the legend's order; the top of a bar is their sum (no confidence intervals drawn).

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'kernels_train_breakdown_phases_v4_separate.svg'

set title "A training step by phase, GEMM v4, the update a pass of its own (s per step of 64 samples)" noenhanced
set xlabel "threads" noenhanced
set ylabel "seconds per step" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 4 Left reverse noenhanced
set bmargin 7.7
set format y "%.1s%c"
set yrange [0:*]
set xtics ("1" 0, "2" 1) noenhanced
set xrange [-0.5:1.5]
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

plot 'kernels_train_breakdown_phases_v4_separate.dat' index 0 using ($1+0.0000):(($2+$3)/2):(0.4):(($2-$3)/2) with boxxyerror lt 1 fs solid 0.75 border -1 title "gather", \
     'kernels_train_breakdown_phases_v4_separate.dat' index 1 using ($1+0.0000):(($2+$3)/2):(0.4):(($2-$3)/2) with boxxyerror lt 2 fs solid 0.75 border -1 title "l0_fwd_gemm", \
     'kernels_train_breakdown_phases_v4_separate.dat' index 2 using ($1+0.0000):(($2+$3)/2):(0.4):(($2-$3)/2) with boxxyerror lt 3 fs solid 0.75 border -1 title "l1_fwd_gemm", \
     'kernels_train_breakdown_phases_v4_separate.dat' index 3 using ($1+0.0000):(($2+$3)/2):(0.4):(($2-$3)/2) with boxxyerror lt 4 fs solid 0.75 border -1 title "l2_fwd_gemm", \
     'kernels_train_breakdown_phases_v4_separate.dat' index 4 using ($1+0.0000):(($2+$3)/2):(0.4):(($2-$3)/2) with boxxyerror lt 5 fs solid 0.75 border -1 title "loss", \
     'kernels_train_breakdown_phases_v4_separate.dat' index 5 using ($1+0.0000):(($2+$3)/2):(0.4):(($2-$3)/2) with boxxyerror lt 6 fs solid 0.75 border -1 title "l2_dw_gemm", \
     'kernels_train_breakdown_phases_v4_separate.dat' index 6 using ($1+0.0000):(($2+$3)/2):(0.4):(($2-$3)/2) with boxxyerror lt 7 fs solid 0.75 border -1 title "l2_da_gemm", \
     'kernels_train_breakdown_phases_v4_separate.dat' index 7 using ($1+0.0000):(($2+$3)/2):(0.4):(($2-$3)/2) with boxxyerror lt 8 fs solid 0.75 border -1 title "l1_dw_gemm", \
     'kernels_train_breakdown_phases_v4_separate.dat' index 8 using ($1+0.0000):(($2+$3)/2):(0.4):(($2-$3)/2) with boxxyerror lt 9 fs solid 0.75 border -1 title "l1_da_gemm", \
     'kernels_train_breakdown_phases_v4_separate.dat' index 9 using ($1+0.0000):(($2+$3)/2):(0.4):(($2-$3)/2) with boxxyerror lt 10 fs solid 0.75 border -1 title "l0_dw_gemm", \
     'kernels_train_breakdown_phases_v4_separate.dat' index 10 using ($1+0.0000):(($2+$3)/2):(0.4):(($2-$3)/2) with boxxyerror lt 11 fs solid 0.75 border -1 title "db", \
     'kernels_train_breakdown_phases_v4_separate.dat' index 11 using ($1+0.0000):(($2+$3)/2):(0.4):(($2-$3)/2) with boxxyerror lt 12 fs solid 0.75 border -1 title "sgd", \
     'kernels_train_breakdown_phases_v4_separate.dat' index 12 using ($1+0.0000):(($2+$3)/2):(0.4):(($2-$3)/2) with boxxyerror lt 13 fs pattern 2 border -1 title "other"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'kernels_train_breakdown_phases_v4_separate.png'
replot
unset output
