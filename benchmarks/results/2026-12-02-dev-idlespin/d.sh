#!/usr/bin/env bash
# Development machine (2 cores, haltpoll cpuidle driver; the demo english Laya on ONNX Runtime's
# CPU provider): the executor thread spinning OMNI_EXECUTOR_SPIN_US after its queue runs dry,
# against sleeping at once. Servers in turn: off, on, off, on; `laya_48` at c=1, 8 and 64 (two
# measured passes each), with per-request Server-Timing.
#   bash d.sh EXPORT_DIR OUT_DIR [SPIN_US]
set -euo pipefail
EX=$1; OUT=$2; SPIN=${3:-2000}; mkdir -p $OUT
PY=${PY:-.venv/bin/python}
k=0
for spin in 0 $SPIN 0 $SPIN; do
  k=$((k + 1)); port=$((18700 + k))
  OMNI_MODELS=$EX OMNI_EXECUTOR_SPIN_US=$spin PORT=$port HOST=127.0.0.1 $PY -m app.launch > $OUT/server-$k-$spin.log 2>&1 &
  pid=$!
  for _ in $(seq 1 120); do curl -sf http://127.0.0.1:$port/readyz > /dev/null && break; sleep 0.5; done
  $PY -m benchmarks.load --url http://127.0.0.1:$port --workload benchmarks/workloads/laya_48.jsonl \
    --concurrency 1,8,64 --requests 1000 --per-request --out $OUT/http-$k-$spin.json --label "spin $spin us" | grep "c=" | sed "s/^/spin $spin: /"
  kill $pid; wait $pid 2>/dev/null || true
done
