#!/usr/bin/env bash
# GPU time of one analysis per benchmark (issue 8): ncu over one instance run three times
# (carry/bench/<b>/one.csv: one instance line, three times), then the warm wall clock. Output: $OUT.
set -u
for b in cifar10_resnet mnist_fc; do
  for rep in 1; do
  POLYCERT_PROFILE=1 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    carry/bin/polycert vnncomp --overwrite --backend cuda --batch 1 --jobs 1 --attack-steps 0 \
    --instances carry/bench/$b/one.csv --results $OUT/ncu_$b.csv > $OUT/ncu_$b.txt 2> $OUT/ncu_$b.err
  done
  python3 - "$OUT/ncu_$b.txt" <<'PY'
import csv,sys,collections
rows=[r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h=rows[0]; i=h.index('Metric Value'); k=h.index('Kernel Name'); u=h.index('Metric Unit')
tot=0; by=collections.Counter(); n=0
for r in rows[1:]:
    v=float(r[i].replace(',','')); v*= {'nsecond':1e-6,'usecond':1e-3,'msecond':1}.get(r[u],1)
    tot+=v; by[r[k][:40]]+=v; n+=1
print(sys.argv[1], 'kernels', n, 'GPU ms', round(tot,3))
for name,v in by.most_common(8): print('   %-40s %.3f ms'%(name,v))
PY
  POLYCERT_PROFILE=1 carry/bin/polycert vnncomp --overwrite --backend cuda --batch 1 --jobs 1 --attack-steps 0 --instances carry/bench/$b/one.csv --results $OUT/w_$b.csv 2>/dev/null; cat $OUT/w_$b.csv
done
