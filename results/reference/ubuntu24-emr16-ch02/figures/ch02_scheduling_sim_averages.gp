# concurdl chart: Scheduling policies (simulated): waiting and turnaround (experiment ch02/scheduling_sim)
# Re-run in the figures directory: gnuplot ch02_scheduling_sim_averages.gp
# It reads ch02_scheduling_sim_averages.dat and writes ch02_scheduling_sim_averages.svg and ch02_scheduling_sim_averages.png; restyle freely.

set encoding utf8
set terminal svg size 800,500 dynamic enhanced font 'sans,11'
set output 'ch02_scheduling_sim_averages.svg'

set title "Scheduling policies (simulated): waiting and turnaround" noenhanced
set xlabel "variant" noenhanced
set ylabel "ticks (log)" noenhanced
set grid
set key at screen 0.5, screen 0.01 center bottom horizontal maxcols 3 Left reverse noenhanced
set bmargin 5.6
set logscale y
set xtics ("fcfs" 0, "sjf" 1, "priority" 2, "priority_aging" 3, "round_robin" 4) noenhanced
set xrange [-0.5:4.5]
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

plot 'ch02_scheduling_sim_averages.dat' index 0 using ($1-0.3000):2:(0.2) with boxes lt 1 title "avg_waiting", \
     'ch02_scheduling_sim_averages.dat' index 1 using ($1-0.1000):2:(0.2) with boxes lt 2 title "avg_waiting_urgent", \
     'ch02_scheduling_sim_averages.dat' index 2 using ($1+0.1000):2:(0.2) with boxes lt 3 title "avg_turnaround", \
     'ch02_scheduling_sim_averages.dat' index 3 using ($1+0.3000):2:(0.2) with boxes lt 4 title "max_waiting"

set terminal pngcairo size 800,500 enhanced font 'sans,11'
set output 'ch02_scheduling_sim_averages.png'
replot
unset output
