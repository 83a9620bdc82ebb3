#!/usr/bin/env bash
# The Laya GPU session on the device machine, in two phases (each one `run` call):
#   bash benchmarks/gpu/laya_h200.sh prepare   # wheels, full-size random english Laya, exports
#   bash benchmarks/gpu/laya_h200.sh bench     # serve on CUDA, HTTP load, in-process baselines
# onnxruntime-gpu must already be unpacked in /tmp/ortsite (../shared/tools/ort-gpu-carry), and
# `.whl` carried in the prepare call (benchmarks/gpu/wheels.sh downloads what the machine lacks).
#
# EXPORTS names the exports, LABEL=ATTENTION:DTYPE[:CODE_DIR] each, written to /tmp/omni/ex-LABEL
# (default: the traced fp32 graph, the fused fp32 graph and the fused fp16 graph; CODE_DIR, a
# checkout of another commit carried along, exports with that commit's code). SERVERS names the
# HTTP servers the bench runs side by side, LABEL:CUDA_GRAPHS[:SDPA_KERNEL[:LOOP[:CODE_DIR[:ENV]]]]
# each (one port per server, from 18080; SDPA_KERNEL is OMNI_CUDA_SDPA_KERNEL, the server's default
# when left out; LOOP is Granian's event loop, asyncio|uvloop|rloop, uvloop (as served) when left out;
# CODE_DIR serves another commit's app, carried along; ENV, NAME=VALUE[,NAME=VALUE...], more
# settings of that server, GRANIAN_INTERFACE=asgi among them for Granian's ASGI interface instead
# of RSGI, as served); WORKLOADS3Q the servers that also get the
# 3-question workload. WORKLOADS1Q names the one-question workloads every server gets, in order
# (default laya_1q; laya_48 is the targets' 48-token row), each into http_<name less laya_>_SERVER.json.
# After its load, each server's CPU time per request at c=64 is measured
# (benchmarks.loop_profile --url --pid --no-spy) into cpu_SERVER.json; after every load, each
# server's GPU memory into gpu_mem_after_load.txt. ITERS sets the in-process calls; LOAD_ARGS go to
# benchmarks.load (e.g. --per-request).
# PROFILE=LABEL:CUDA_GRAPHS[:SDPA_KERNEL] runs benchmarks.loop_profile (py-spy, c=64) on that export
# (PROFILE_ARGS: more of its options, e.g. --workload; PROFILE_LINES: how much of its report to print).
# DRIFT=1 (prepare) measures each export's fp16 drift on CUDA against the fp32 torch model
# (benchmarks.laya_drift, DRIFT_BATCHES batches of 12 rows, default 8: ~30 s).
# INPROCESS=0 skips the in-process comparison. SKIP_WHEELS=1: the wheels in .whl are already installed in /tmp/site. INPROCESS_ARGS go to
# benchmarks.inprocess (--kernels: CUPTI kernel times of each export).
set -euo pipefail
phase=${1:?prepare or bench}
OUT=${OUT:-/tmp/omni-out}
EXPORTS=${EXPORTS:-traced=sdpa:float32 mha=mha:float32 mha16=mha:float16}
SERVERS=${SERVERS-traced:0 traced:64 mha:64 mha16:64}     # empty: no servers
WORKLOADS3Q=${WORKLOADS3Q-traced:0 mha16:64}
ITERS=${ITERS:-100}
WORKLOADS1Q=${WORKLOADS1Q:-laya_1q}
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
    label=${e%%=*}; IFS=: read -r attention dtype code <<< "${e#*=}"
    code=$(cd "${code:-.}" && pwd)
    (cd "$code" && PYTHONPATH=/tmp/ortsite:/tmp/site:$code python3 -m models.export laya --checkpoint $CK \
      --out /tmp/omni/ex-$label --attention $attention --dtype $dtype) > "$OUT/export-$label.log" 2>&1 &
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
from models.laya.export import INPUTS, _example
for path in sys.argv[1:]:
    feeds = dict(zip(INPUTS, (t.numpy() for t in _example(50000, 4, 150, 3, seed=1))))
    try:
        gpu = sessions.create(path + "/model.onnx", "cuda").session.run(None, feeds)
    except Exception as exc:
        print(path, "CUDA FAILED:", str(exc)[:400]); continue
    cpu = sessions.create(path + "/model.onnx", "cpu").session.run(None, feeds)
    print(path, "cuda vs cpu max |Δlogit| %.2e" % max(float(np.abs(a - b).max()) for a, b in zip(gpu, cpu)))
PY
  # DRIFT=1: what CUDA serves against the fp32 torch model, over 96 random rows by default (the
  # export's own gate, on CUDA here too, checks 12).
  if [ "${DRIFT:-0}" = 1 ]; then
    python3 -m benchmarks.laya_drift --checkpoint $CK $(for e in $EXPORTS; do echo --export ${e%%=*}=/tmp/omni/ex-${e%%=*}; done) \
      --device cuda --batches ${DRIFT_BATCHES:-8} --out "$OUT/drift_cuda.json" 2>&1 | grep -v -i warn || echo "drift: failed"
  fi
  exit 0
fi
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee "$OUT/gpu.csv"
python3 -m benchmarks.host_facts --out "$OUT/host.json" || echo "host_facts failed"   # the CPU, its steal, a Python probe, the GPU clocks
set -o pipefail
t0=$(python3 -c 'import time; print(time.time())')
port=18080; pids=(); ports=()
name() { echo "$1" | tr ':/' '--'; }
for s in $SERVERS; do
  IFS=: read -r label graphs sdpa loop code extra <<< "$s"
  code=$(cd "${code:-.}" && pwd)
  IFS=, read -r -a extra <<< "${extra:-}"
  # SDPA_KERNEL and LOOP left out: the server's defaults.
  (cd "$code" && OMNI_MODELS=/tmp/omni/ex-$label OMNI_DEVICE=cuda OMNI_CUDA_GRAPHS=$graphs PYTHONPATH=/tmp/ortsite:/tmp/site:$code \
    exec env GRANIAN_INTERFACE=${GRANIAN_INTERFACE:-rsgi} ${sdpa:+OMNI_CUDA_SDPA_KERNEL=$sdpa} GRANIAN_LOOP=${loop:-${GRANIAN_LOOP:-uvloop}} \
    "${extra[@]}" python3 -m granian --workers 1 --host 127.0.0.1 --port $port --log-level warning \
    app.main:app) > "$OUT/server-$(name "$s").log" 2>&1 &
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
      --concurrency 1,8,16,64 ${LOAD_ARGS:-} --out "$OUT/http_${w#laya_}_$(name "$s").json" --label "$w, server $s" | tail -4
  done
  case " $WORKLOADS3Q " in *" $s "*)
    python3 -m benchmarks.load --url http://127.0.0.1:$port --workload benchmarks/workloads/laya_3q.jsonl \
      --concurrency 1,16 --out "$OUT/http_3q_$(name "$s").json" --label "3 questions, server $s" | tail -2 ;;
  esac
  python3 -m benchmarks.loop_profile --url http://127.0.0.1:$port --pid ${pids[$((i - 1))]} --no-spy --seconds 8 \
    --workload benchmarks/workloads/${WORKLOADS1Q##* }.jsonl \
    --out "$OUT/cpu_$(name "$s").json" | head -2 || echo "CPU per request: failed on $s"
  # The server's own counters after its load (batch sizes, captures, stage latencies).
  python3 -m benchmarks.scrape http://127.0.0.1:$port > "$OUT/metrics_$(name "$s").txt" || true
done
# Each server's GPU memory after its load (CUDA graphs of every shape it captured included).
i=0
for s in $SERVERS; do
  echo "$s $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | grep "^${pids[$i]}," || echo "${pids[$i]}, ?")"
  i=$((i + 1))
done | tee "$OUT/gpu_mem_after_load.txt"     # per process where nvidia-smi sees it ("?" in a container)
echo "all servers: $(nvidia-smi --query-gpu=memory.used --format=csv,noheader)" | tee -a "$OUT/gpu_mem_after_load.txt"
[ ${#pids[@]} -eq 0 ] || { kill "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true; }
if [ -n "${PROFILE:-}" ]; then      # the event loop's CPU under c=64 (py-spy from .whl: pip's --target bin)
  IFS=: read -r label graphs sdpa <<< "$PROFILE"
  # Granian's auto loop takes rloop where it is installed (.whl carries it): the servers above run uvloop.
  PATH=/tmp/site/bin:$PATH GRANIAN_LOOP=${GRANIAN_LOOP:-uvloop} OMNI_CUDA_GRAPHS=$graphs env ${sdpa:+OMNI_CUDA_SDPA_KERNEL=$sdpa} python3 -m benchmarks.loop_profile \
    --export /tmp/omni/ex-$label --device cuda --out "$OUT/loop-profile.json" ${PROFILE_ARGS:-} | head -${PROFILE_LINES:-30} \
    || echo "loop profile failed"
fi
[ "${INPROCESS:-1}" = 1 ] || exit 0
python3 -m benchmarks.inprocess --checkpoint $CK $(for e in $EXPORTS; do echo --export ${e%%=*}=/tmp/omni/ex-${e%%=*}; done) \
  --warmup 10 --iters $ITERS ${INPROCESS_ARGS:-} --out "$OUT/inprocess.json"
