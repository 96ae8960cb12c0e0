# concurdl chart: Hazard demonstrations: time until detected (or capped) vs fixed (experiment ch02/hazards)
# Re-run in the figures directory: gnuplot ch02_hazards_time.gp
# It reads ch02_hazards_time.dat and writes ch02_hazards_time.svg and ch02_hazards_time.png; restyle freely.
# note: 1 invalid record left out of this chart (see the table).

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch02_hazards_time.svg'

set title "Hazard demonstrations: time until detected (or capped) vs fixed" noenhanced
set xlabel "variant" noenhanced
set ylabel "seconds (log)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 5 Left reverse noenhanced
set bmargin 4.5
set logscale y
set format y "%.0s%c"
set xtics ("deadlock_naive" 0, "deadlock_scoped_lock" 1, "livelock_polite" 2, "livelock_randomised" 3) noenhanced
set xrange [-0.5:3.5]
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

plot 'ch02_hazards_time.dat' index 0 using ($1-0.3200):2:(0.16) with boxes lt 1 title "threads=2", \
     'ch02_hazards_time.dat' index 0 using ($1-0.3200):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch02_hazards_time.dat' index 1 using ($1-0.1600):2:(0.16) with boxes lt 2 title "threads=4", \
     'ch02_hazards_time.dat' index 1 using ($1-0.1600):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch02_hazards_time.dat' index 2 using ($1+0.0000):2:(0.16) with boxes lt 3 title "threads=8", \
     'ch02_hazards_time.dat' index 2 using ($1+0.0000):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch02_hazards_time.dat' index 3 using ($1+0.1600):2:(0.16) with boxes lt 4 title "threads=16", \
     'ch02_hazards_time.dat' index 3 using ($1+0.1600):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle, \
     'ch02_hazards_time.dat' index 4 using ($1+0.3200):2:(0.16) with boxes lt 5 title "threads=1", \
     'ch02_hazards_time.dat' index 4 using ($1+0.3200):2:3:4 with yerrorbars lc rgb 'black' lw 1.5 pt 7 ps 0.3 notitle

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch02_hazards_time.png'
replot
unset output
