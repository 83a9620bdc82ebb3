#!/usr/bin/env bash
# Development machine (2 cores, the demo's tiny random english Laya on ONNX Runtime's CPU
# provider): each full garbage collection under load (benchmarks/gc_trace) on rloop and on
# uvloop, servers in turn, laya_48 at c=64 (two measured passes of 4,000 requests). rloop comes
# from pip (`pip install rloop==0.5.0 --target DIR`); the GPU machine's wheels carry it.
#   bash l.sh EXPORT_DIR RLOOP_SITE OUT_DIR [CODE_DIR]   (CODE_DIR: another commit's tree, `git archive`)
set -euo pipefail
EX=$1; SITE=$2; OUT=$(mkdir -p $3 && cd $3 && pwd); CODE=${4:-$PWD}
PY=${PY:-$PWD/.venv/bin/python}; HERE=$PWD
k=0
for loop in rloop uvloop rloop uvloop; do
  k=$((k + 1)); port=$((18700 + k)); rm -f $OUT/gc-$k-$loop.*; mkdir -p $OUT
  (cd $CODE && GRANIAN_LOOP=$loop GC_TRACE_LOG=$OUT/gc-$k-$loop PYTHONPATH=$HERE/benchmarks/gc_trace:$SITE:$CODE \
    OMNI_MODELS=$EX $PY -m granian --interface rsgi --workers 1 --loop $loop --host 127.0.0.1 --port $port \
    --log-level warning app.main:app > $OUT/server-$k-$loop.log 2>&1) &
  pid=$!
  for _ in $(seq 1 120); do curl -sf http://127.0.0.1:$port/readyz > /dev/null && break; sleep 0.5; done
  $PY -m benchmarks.load --url http://127.0.0.1:$port --workload benchmarks/workloads/laya_48.jsonl \
    --concurrency 64 --requests 4000 --out $OUT/http-$k-$loop.json --label "$loop" | grep "c=" | sed "s/^/$k $loop /"
  cut -c1-160 $OUT/gc-$k-$loop.* | tail -4 | sed "s/^/$k $loop /"
  pkill -P $pid 2>/dev/null || true; kill $pid 2>/dev/null || true; pkill -f "port $port" || true; wait $pid 2>/dev/null || true
  sleep 1
done
