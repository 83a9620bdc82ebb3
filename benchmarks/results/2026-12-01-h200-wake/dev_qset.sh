#!/usr/bin/env bash
# Development machine (2 cores, a Firecracker VM whose idle cores use the haltpoll cpuidle driver), tiny Laya
# english export on the CPU (/tmp/lp/ex): servers with OMNI_CPU_DMA_LATENCY_US=0 (qset) and without (plain),
# in turn and in reverse, laya_48 at c=1, 8, 16 and 64. Results: dev-qset/.
R=${1:-/tmp/wt3}; rm -rf $R; mkdir -p $R
export PATH=$PWD/.venv/bin:$PATH
sed -n '/^helpers=()/,/^case \$phase in/p' benchmarks/results/2026-12-01-h200-wake/w.sh | head -n -1 > /tmp/wfuncs.sh
OUT=$R; source /tmp/wfuncs.sh
k=0
for m in plain qset qset plain; do
  k=$((k+1))
  if [ $m = qset ]; then e=OMNI_CPU_DMA_LATENCY_US=0; else e=; fi
  DEVICE=cpu serve 18097 /tmp/lp/ex $R/server-$k.log $e || exit 1
  python3 -m benchmarks.load --url http://127.0.0.1:18097 --workload benchmarks/workloads/laya_48.jsonl \
      --concurrency 1,8,16,64 --out $R/all_${k}_$m.json --label "$m $k" | grep -v "^\s*$" | sed "s/^/$m /"
  kill $S; wait $S 2>/dev/null
done
