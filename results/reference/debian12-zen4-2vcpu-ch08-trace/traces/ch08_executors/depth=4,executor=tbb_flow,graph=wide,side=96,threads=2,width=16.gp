# concurdl timeline (Gantt chart): ch08/executors depth=4, executor=tbb_flow, graph=wide, side=96, threads=2, width=16
# Re-run in this directory: gnuplot depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.gp (reads depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.dat)
set encoding utf8
set terminal svg size 900,280 dynamic enhanced font 'sans,11'
set output 'depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.svg'
set title "ch08/executors\ndepth=4, executor=tbb_flow, graph=wide, side=96, threads=2, width=16" noenhanced
set xlabel 'time (ms)'
set grid xtics
unset ytics
set ytics ("thread 0" 0, "thread 2" 1) noenhanced
set yrange [1.5:-0.5]
set xrange [0:5.263739]
set key outside bottom center horizontal noenhanced
set style fill solid 0.85 border lc rgb '#333333'
plot 'depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.dat' index 0 using (($1+$2)/2):3:(($2-$1)/2):4 with boxxyerror lc rgb '#DDDDDD' title "run (the gaps: waiting)", \
     'depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.dat' index 1 using (($1+$2)/2):3:(($2-$1)/2):4 with boxxyerror lc rgb '#4C72B0' title "input", \
     'depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.dat' index 2 using (($1+$2)/2):3:(($2-$1)/2):4 with boxxyerror lc rgb '#DD8452' title "matmul", \
     'depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.dat' index 3 using (($1+$2)/2):3:(($2-$1)/2):4 with boxxyerror lc rgb '#55A868' title "scale", \
     'depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.dat' index 4 using (($1+$2)/2):3:(($2-$1)/2):4 with boxxyerror lc rgb '#C44E52' title "relu", \
     'depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.dat' index 5 using (($1+$2)/2):3:(($2-$1)/2):4 with boxxyerror lc rgb '#8172B3' title "add", \
     'depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.dat' index 0 using (($1+$2)/2):3:5 with labels font 'sans,8' tc rgb 'black' notitle, \
     'depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.dat' index 1 using (($1+$2)/2):3:5 with labels font 'sans,8' tc rgb 'black' notitle, \
     'depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.dat' index 2 using (($1+$2)/2):3:5 with labels font 'sans,8' tc rgb 'black' notitle, \
     'depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.dat' index 3 using (($1+$2)/2):3:5 with labels font 'sans,8' tc rgb 'black' notitle, \
     'depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.dat' index 4 using (($1+$2)/2):3:5 with labels font 'sans,8' tc rgb 'black' notitle, \
     'depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.dat' index 5 using (($1+$2)/2):3:5 with labels font 'sans,8' tc rgb 'black' notitle
set terminal pngcairo size 900,280 enhanced font 'sans,11'
set output 'depth=4,executor=tbb_flow,graph=wide,side=96,threads=2,width=16.png'
replot
unset output
