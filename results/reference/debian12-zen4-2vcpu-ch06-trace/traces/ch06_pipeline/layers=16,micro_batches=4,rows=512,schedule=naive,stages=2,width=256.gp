# concurdl timeline (Gantt chart): ch06/pipeline layers=16, micro_batches=4, rows=512, schedule=naive, stages=2, width=256
# Re-run in this directory: gnuplot layers=16,micro_batches=4,rows=512,schedule=naive,stages=2,width=256.gp (reads layers=16,micro_batches=4,rows=512,schedule=naive,stages=2,width=256.dat)
set encoding utf8
set terminal svg size 900,260 dynamic enhanced font 'sans,11'
set output 'layers=16,micro_batches=4,rows=512,schedule=naive,stages=2,width=256.svg'
set title "ch06/pipeline layers=16, micro_batches=4, rows=512, schedule=naive, stages=2, width=256" noenhanced
set xlabel 'time (ms)'
set grid xtics
unset ytics
set ytics ("stage 0" 0, "stage 1" 1) noenhanced
set yrange [1.5:-0.5]
set xrange [0:44.796586]
set key outside bottom center horizontal noenhanced
set style fill solid 0.85 border lc rgb '#333333'
plot 'layers=16,micro_batches=4,rows=512,schedule=naive,stages=2,width=256.dat' index 0 using (($1+$2)/2):3:(($2-$1)/2):4 with boxxyerror lc rgb '#DDDDDD' title "step (the gaps: waiting)", \
     'layers=16,micro_batches=4,rows=512,schedule=naive,stages=2,width=256.dat' index 1 using (($1+$2)/2):3:(($2-$1)/2):4 with boxxyerror lc rgb '#4C72B0' title "forward", \
     'layers=16,micro_batches=4,rows=512,schedule=naive,stages=2,width=256.dat' index 2 using (($1+$2)/2):3:(($2-$1)/2):4 with boxxyerror lc rgb '#DD8452' title "backward", \
     'layers=16,micro_batches=4,rows=512,schedule=naive,stages=2,width=256.dat' index 0 using (($1+$2)/2):3:5 with labels font 'sans,8' tc rgb 'black' notitle, \
     'layers=16,micro_batches=4,rows=512,schedule=naive,stages=2,width=256.dat' index 1 using (($1+$2)/2):3:5 with labels font 'sans,8' tc rgb 'black' notitle, \
     'layers=16,micro_batches=4,rows=512,schedule=naive,stages=2,width=256.dat' index 2 using (($1+$2)/2):3:5 with labels font 'sans,8' tc rgb 'black' notitle
set terminal pngcairo size 900,260 enhanced font 'sans,11'
set output 'layers=16,micro_batches=4,rows=512,schedule=naive,stages=2,width=256.png'
replot
unset output
