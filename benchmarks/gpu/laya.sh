#!/usr/bin/env bash
# Laya english on the GPU machine, in two phases (one `run` call each; benchmarks/gpu/README.md):
#   bash benchmarks/gpu/laya.sh prepare   # wheels, a full-size random english checkpoint, its exports
#   bash benchmarks/gpu/laya.sh bench     # serve on CUDA, HTTP load, CPU a request, in-process baselines
# onnxruntime-gpu must already be unpacked in /tmp/ortsite, and `.whl` carried in the prepare call.
#
# EXPORTS   exports to write, LABEL=DTYPE[:CODE_DIR] each, into /tmp/omni/ex-LABEL (default
#           mha16=float16, as served; CODE_DIR: another commit's checkout, carried along).
# SERVERS   servers to start side by side (ports from 18080) and load one after another,
#           LABEL[:NAME=VALUE,...] each: the export LABEL served with those settings (CODE=DIR serves
#           another commit's app). Default: mha16, every setting as served.
# WORKLOADS1Q  one-question workloads each server gets at c=1, 8, 16, 64, in order (default
#           "laya_48 laya_spread"), into http_<workload less laya_>_<server>.json; then 8 s at c=64
#           on the first one (benchmarks.loop_profile --no-spy: CPU a request) into cpu_<server>.json.
# WORKLOADS3Q  the servers that also get laya_3q at c=1 and 16 (default: all).
# LOAD_ARGS more options for benchmarks.load (default --per-request; e.g. "--concurrency 1,64,1,64").
# INPROCESS=0 skips the in-process comparison with the `laya` package (ITERS calls, default 100).
# DRIFT=1   (prepare) each export's fp16 drift on CUDA against the fp32 torch model, 96 rows.
# PROFILE=LABEL  py-spy on that export's own server at c=64 (benchmarks.loop_profile; PROFILE_ARGS).
# SKIP_WHEELS=1  the wheels in .whl are installed in /tmp/site already.
set -euo pipefail
phase=${1:?prepare or bench}
OUT=${OUT:-/tmp/omni-out}
EXPORTS=${EXPORTS:-mha16=float16}
SERVERS=${SERVERS-mha16}     # empty: no servers
WORKLOADS1Q=${WORKLOADS1Q:-laya_48 laya_spread}
WORKLOADS3Q=${WORKLOADS3Q-$SERVERS}
ITERS=${ITERS:-100}
mkdir -p "$OUT" /tmp/omni
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD PYTHONUNBUFFERED=1
CK=${CK:-/tmp/omni/ck-english}
if [ "$phase" = prepare ]; then
  [ -n "${SKIP_WHEELS:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
  python3 -c 'import onnxruntime as o, torch, transformers; o.preload_dlls(); print("onnxruntime", o.__version__, o.get_available_providers(), "torch", torch.__version__, "transformers", transformers.__version__)'
  t0=$(date +%s)
  [ -f $CK/model.safetensors ] || python3 -m models.laya.random_checkpoint $CK --variant english --size full
  echo "checkpoint $(( $(date +%s) - t0 )) s"
  pids=()
  for e in $EXPORTS; do
    label=${e%%=*}; IFS=: read -r dtype code <<< "${e#*=}"
    code=$(cd "${code:-.}" && pwd)
    (cd "$code" && PYTHONPATH=/tmp/ortsite:/tmp/site:$code python3 -m models.export laya --checkpoint $CK \
      --out /tmp/omni/ex-$label --dtype $dtype) > "$OUT/export-$label.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait $p || true; done
  for e in $EXPORTS; do echo "${e%%=*}: $(tail -1 "$OUT/export-${e%%=*}.log")"; done
  echo "build+export $(( $(date +%s) - t0 )) s"
  # Every export on the CUDA provider against ONNX Runtime's CPU kernels, once, before the bench.
  python3 - $(for e in $EXPORTS; do echo /tmp/omni/ex-${e%%=*}; done) <<'PY'
import sys
import numpy as np
from app.runtime import sessions
from models.laya.export import INPUTS, example_batch
for path in sys.argv[1:]:
    feeds = dict(zip(INPUTS, (t.numpy() for t in example_batch(50000, 4, 150, 3, seed=1))))
    try:
        gpu = sessions.create(path + "/model.onnx", "cuda").session.run(None, feeds)
    except Exception as exc:
        print(path, "CUDA FAILED:", str(exc)[:400]); continue
    cpu = sessions.create(path + "/model.onnx", "cpu").session.run(None, feeds)
    print(path, "cuda vs cpu max |Δlogit| %.2e" % max(float(np.abs(a - b).max()) for a, b in zip(gpu, cpu)))
PY
  if [ "${DRIFT:-0}" = 1 ]; then
    python3 -m benchmarks.laya_drift --checkpoint $CK $(for e in $EXPORTS; do echo --export ${e%%=*}=/tmp/omni/ex-${e%%=*}; done) \
      --device cuda --batches ${DRIFT_BATCHES:-8} --out "$OUT/drift_cuda.json" 2>&1 | grep -v -i warn || echo "drift: failed"
  fi
  exit 0
fi
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee "$OUT/gpu.csv"
python3 -m benchmarks.host_facts --out "$OUT/host.json" || echo "host_facts failed"   # CPU, steal, Python speed, GPU clocks
t0=$(python3 -c 'import time; print(time.time())')
port=18080; pids=(); ports=()
name() { echo "$1" | tr ':/' '--'; }
for s in $SERVERS; do
  label=${s%%:*}; settings=; [ "$s" != "$label" ] && settings=${s#*:}
  code=.; extra=()
  IFS=, read -r -a kv <<< "$settings"
  for x in "${kv[@]}"; do case $x in CODE=*) code=${x#CODE=} ;; *) extra+=("$x") ;; esac; done
  code=$(cd "$code" && pwd)
  (cd "$code" && OMNI_MODELS=/tmp/omni/ex-$label OMNI_DEVICE=cuda PYTHONPATH=/tmp/ortsite:/tmp/site:$code \
    exec env GRANIAN_INTERFACE=${GRANIAN_INTERFACE:-rsgi} GRANIAN_LOOP=${GRANIAN_LOOP:-uvloop} "${extra[@]}" \
    python3 -m granian --workers 1 --host 127.0.0.1 --port $port --log-level warning app.main:app) \
    > "$OUT/server-$(name "$s").log" 2>&1 &
  pids+=($!); ports+=($port); port=$((port + 1))
done
# Start-to-ready and the first request after it (the first one-question workload's first line).
python3 -m benchmarks.startup --since "$t0" $(for p in "${ports[@]}"; do echo --port $p; done) \
  $(for p in "${pids[@]}"; do echo --pid $p; done) --timeout 180 --first benchmarks/workloads/${WORKLOADS1Q%% *}.jsonl \
  | tee "$OUT/startup.txt" || { tail -30 "$OUT"/server*.log; exit 1; }
nvidia-smi --query-gpu=memory.used --format=csv,noheader | tee "$OUT/gpu_mem_serving.txt"
i=0
for s in $SERVERS; do
  port=${ports[$i]}; i=$((i + 1))
  for w in $WORKLOADS1Q; do
    python3 -m benchmarks.load --url http://127.0.0.1:$port --workload benchmarks/workloads/$w.jsonl \
      --concurrency 1,8,16,64 ${LOAD_ARGS:---per-request} --out "$OUT/http_${w#laya_}_$(name "$s").json" \
      --label "$w, server $s" | tail -4
  done
  case " $WORKLOADS3Q " in *" $s "*)
    python3 -m benchmarks.load --url http://127.0.0.1:$port --workload benchmarks/workloads/laya_3q.jsonl \
      --concurrency 1,16 --out "$OUT/http_3q_$(name "$s").json" --label "3 questions, server $s" | tail -2 ;;
  esac
  python3 -m benchmarks.loop_profile --url http://127.0.0.1:$port --pid ${pids[$((i - 1))]} --no-spy --seconds 8 \
    --workload benchmarks/workloads/${WORKLOADS1Q%% *}.jsonl \
    --out "$OUT/cpu_$(name "$s").json" | head -2 || echo "CPU per request: failed on $s"
  python3 -m benchmarks.scrape http://127.0.0.1:$port > "$OUT/metrics_$(name "$s").txt" || true
done
# GPU memory after the loads (CUDA graphs of every shape included).
echo "all servers: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader)" | tee "$OUT/gpu_mem_after_load.txt"
[ ${#pids[@]} -eq 0 ] || { kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true; }
if [ -n "${PROFILE:-}" ]; then      # py-spy comes with .whl (pip's --target bin)
  PATH=/tmp/site/bin:$PATH GRANIAN_LOOP=${GRANIAN_LOOP:-uvloop} python3 -m benchmarks.loop_profile \
    --export /tmp/omni/ex-$PROFILE --device cuda --out "$OUT/loop-profile.json" ${PROFILE_ARGS:-} | head -30 \
    || echo "loop profile failed"
fi
[ "${INPROCESS:-1}" = 1 ] || exit 0
python3 -m benchmarks.inprocess --checkpoint $CK $(for e in $EXPORTS; do echo --export ${e%%=*}=/tmp/omni/ex-${e%%=*}; done) \
  --warmup 10 --iters $ITERS ${INPROCESS_ARGS:-} --out "$OUT/inprocess.json"
