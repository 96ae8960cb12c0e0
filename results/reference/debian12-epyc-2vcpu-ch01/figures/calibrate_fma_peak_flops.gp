# concurdl chart: FMA throughput vs threads (experiment calibrate/fma_peak)
# Re-run in the figures directory: gnuplot calibrate_fma_peak_flops.gp
# It reads calibrate_fma_peak_flops.dat and writes calibrate_fma_peak_flops.svg and calibrate_fma_peak_flops.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'calibrate_fma_peak_flops.svg'

set title "FMA throughput vs threads" noenhanced
set xlabel "threads" noenhanced
set ylabel "FLOP/s" noenhanced
set grid
set key inside top left box opaque noenhanced
set format y "%.1s%c"
set yrange [0:*]
set xtics (1, 2)
set offsets graph 0.02, graph 0.02, 0, 0

plot 'calibrate_fma_peak_flops.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "measured"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'calibrate_fma_peak_flops.png'
replot
unset output
