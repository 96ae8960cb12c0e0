# concurdl chart: Page cache, 4 KiB requests: bytes/s vs queue depth (experiment ch03/read_throughput)
# Re-run in the figures directory: gnuplot ch03_read_throughput_page_cache_qd.gp
# It reads ch03_read_throughput_page_cache_qd.dat and writes ch03_read_throughput_page_cache_qd.svg and ch03_read_throughput_page_cache_qd.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch03_read_throughput_page_cache_qd.svg'

set title "Page cache, 4 KiB requests: bytes/s vs queue depth" noenhanced
set xlabel "qd" noenhanced
set ylabel "bytes/s" noenhanced
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

plot 'ch03_read_throughput_page_cache_qd.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "pread", \
     'ch03_read_throughput_page_cache_qd.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "mmap", \
     'ch03_read_throughput_page_cache_qd.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "uring", \
     'ch03_read_throughput_page_cache_qd.dat' index 3 using 1:2:3:4 with yerrorlines lt 4 lw 2 pt 7 ps 0.8 title "uring_fixed"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch03_read_throughput_page_cache_qd.png'
replot
unset output
