#!/usr/bin/env bash
# Development machine (2 cores, tiny random english Laya on ONNX Runtime's CPU provider): does
# freezing the server's objects out of garbage collection (OMNI_GC_FREEZE) shorten the full
# collections' pauses and the c=64 tail? Servers in turn: on, off, on, off; each `laya_48` at
# c=16 and 64 (two measured passes); its full collections (omni_gc_full_collection_seconds)
# scraped once ready and again after the load.
#   bash g.sh EXPORT_DIR OUT_DIR
set -euo pipefail
EX=$1; OUT=$2; mkdir -p $OUT
PY=${PY:-.venv/bin/python}
k=0
for mode in on off on off; do
  k=$((k + 1)); port=$((18600 + k))
  freeze=1; [ $mode = off ] && freeze=0
  OMNI_MODELS=$EX OMNI_GC_FREEZE=$freeze PORT=$port HOST=127.0.0.1 $PY -m app.launch > $OUT/server-$k-$mode.log 2>&1 &
  pid=$!
  for _ in $(seq 1 120); do curl -sf http://127.0.0.1:$port/readyz > /dev/null && break; sleep 0.5; done
  curl -s http://127.0.0.1:$port/metrics | grep "^omni_gc_full_collection_seconds_\(count\|sum\)" | sed 's/^/ready: /' | tee $OUT/gc-$k-$mode.txt
  $PY -m benchmarks.load --url http://127.0.0.1:$port --workload benchmarks/workloads/laya_48.jsonl \
    --concurrency 16,64 --requests 2000 --out $OUT/http-$k-$mode.json --label "gc freeze $mode" | grep "c="
  curl -s http://127.0.0.1:$port/metrics | grep "^omni_gc_full_collection_seconds_\(count\|sum\)" | sed 's/^/after the load: /' | tee -a $OUT/gc-$k-$mode.txt
  grep -h "froze" $OUT/server-$k-$mode.log | sed 's/^.*INFO //' || true
  kill $pid; wait $pid 2>/dev/null || true
done
