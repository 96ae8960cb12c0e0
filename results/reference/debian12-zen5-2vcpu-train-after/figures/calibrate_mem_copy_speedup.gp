# concurdl chart: Memory bandwidth: speedup vs threads (experiment calibrate/mem_copy)
# Re-run in the figures directory: gnuplot calibrate_mem_copy_speedup.gp
# It reads calibrate_mem_copy_speedup.dat and writes calibrate_mem_copy_speedup.svg and calibrate_mem_copy_speedup.png; restyle freely.
# note: Amdahl fit (measured): serial fraction f = 1, fitted on p <= 2, the core count of vm.
# note: Karp–Flatt serial fraction e(p) for measured: p=2: 1.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'calibrate_mem_copy_speedup.svg'

set title "Memory bandwidth: speedup vs threads" noenhanced
set xlabel "threads" noenhanced
set ylabel "speedup (×)" noenhanced
set grid
set key inside top left box opaque noenhanced
set yrange [0:*]
set xtics (1, 2)
set offsets graph 0.02, graph 0.02, 0, 0
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

plot 'calibrate_mem_copy_speedup.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "measured", \
     'calibrate_mem_copy_speedup.dat' index 1 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "ideal (S = p)", \
     'calibrate_mem_copy_speedup.dat' index 2 using 1:2 with lines lt 1 dt 2 lw 1.5 title "Amdahl fit (measured): f = 1"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'calibrate_mem_copy_speedup.png'
replot
unset output
