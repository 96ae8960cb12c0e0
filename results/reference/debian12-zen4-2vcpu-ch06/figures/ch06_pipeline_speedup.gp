# concurdl chart: Step speedup over one stage, m = 16 (experiment ch06/pipeline)
# Re-run in the figures directory: gnuplot ch06_pipeline_speedup.gp
# It reads ch06_pipeline_speedup.dat and writes ch06_pipeline_speedup.svg and ch06_pipeline_speedup.png; restyle freely.
# note: Amdahl fit (naive): serial fraction f = 0.879, fitted on p <= 2, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (gpipe): serial fraction f = 0, fitted on p <= 2, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Amdahl fit (1f1b): serial fraction f = 0, fitted on p <= 2, the core count of vm; points beyond are oversubscribed and not fitted.
# note: Karp–Flatt serial fraction e(p) for naive: p=2: 0.879, p=4: 1.02.
# note: Karp–Flatt serial fraction e(p) for gpipe: p=2: -0.0205, p=4: 0.347.
# note: Karp–Flatt serial fraction e(p) for 1f1b: p=2: -0.00518, p=4: 0.356.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch06_pipeline_speedup.svg'

set title "Step speedup over one stage, m = 16" noenhanced
set xlabel "stages" noenhanced
set ylabel "speedup (×)" noenhanced
set grid
set key inside top left box opaque noenhanced
set yrange [0:*]
set xtics (1, 2, 4)
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

plot 'ch06_pipeline_speedup.dat' index 0 using 1:2:3:4 with yerrorlines lt 1 lw 2 pt 7 ps 0.8 title "naive", \
     'ch06_pipeline_speedup.dat' index 1 using 1:2:3:4 with yerrorlines lt 2 lw 2 pt 7 ps 0.8 title "gpipe", \
     'ch06_pipeline_speedup.dat' index 2 using 1:2:3:4 with yerrorlines lt 3 lw 2 pt 7 ps 0.8 title "1f1b", \
     'ch06_pipeline_speedup.dat' index 3 using 1:2 with lines lc rgb '#404040' dt 3 lw 1.5 title "ideal (S = p)", \
     'ch06_pipeline_speedup.dat' index 4 using 1:2 with lines lt 1 dt 2 lw 1.5 title "Amdahl fit (naive): f = 0.879", \
     'ch06_pipeline_speedup.dat' index 5 using 1:2 with lines lt 2 dt 2 lw 1.5 title "Amdahl fit (gpipe): f = 0", \
     'ch06_pipeline_speedup.dat' index 6 using 1:2 with lines lt 3 dt 2 lw 1.5 title "Amdahl fit (1f1b): f = 0"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch06_pipeline_speedup.png'
replot
unset output
