#!/usr/bin/env bash
# One-GPU machine: does c=1 pay for host threads that sleep through each pass? Laya and Cua-S1 at
# c=1 with the machine's cores kept busy by idle-class spinners against without; and Cua-S1 4B
# through the served code (RSGI, tokenizer pool of 4), fp16 and bfloat16, at c=1, 8, 16 and 64.
# After the ort-gpu-carry calls, one call per phase:
#   w.sh $OUT prep   ONNX Runtime and wheels; Cua-S1 4B's checkpoint, then its fp16 (gdnf) and
#                    bfloat16 (gdnf, EX_SUFFIX=-bf16) exports in the background while Laya english's
#                    checkpoint and fp16 export are built
#   w.sh $OUT wake   (waits for the Cua-S1 exports) one Laya server (as served): laya_48 at c=1 in
#                    rounds of MODES (plain: nothing else runs; burn: one SCHED_IDLE spinner process a
#                    core; qos: /dev/cpu_dma_latency held at 0), then c=1-64 and 8 s at c=64 (the
#                    worker's CPU a request) in rounds of MODES64
#   w.sh $OUT cua    (cuaprep: on a fresh machine, after the ort-gpu-carry calls, both Cua-S1 exports
#                    first) qwen_h200.sh bench cua-s1, cua_218 at c=1, 8, 16 and 64, the fp16 export then the
#                    bfloat16 one; then the fp16 server at c=1 in rounds of plain and burn
#   w.sh $OUT bf16   (a fresh machine, after the ort-gpu-carry calls) both Cua-S1 exports; the nodes each
#                    one leaves to the CPU provider; pass_probe's kernels at 1 and 8 rows of each
#   w.sh $OUT clef   (a fresh machine, after the ort-gpu-carry calls) Clef-Flash 9B fp16 (gdnf): export, then
#                    clef_1q, clef_4q and clef_16q at c=1, 8 and 16
# Only a few files come back from a call, so each phase returns one archive.
R=$1; phase=$2; mkdir -p $R/$phase; t0=$(date +%s)
trap 'stop_helper; tar -C $R -czf $R/$phase.tgz $phase && rm -rf $R/$phase' EXIT
trap 'exit 143' TERM
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/$phase
helpers=()
start_helper() {       # $1: plain, burn or qos
  case $1 in
  burn)
    for _ in $(seq $(nproc)); do
      python3 -c 'import os; os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
while True: pass' & helpers+=($!)
    done ;;
  qos)
    python3 -c 'import os, struct, time
fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY); os.write(fd, struct.pack("i", 0)); time.sleep(3600)' \
      2> $OUT/qos.err & helpers+=($!) ;;
  esac
  sleep 1
}
stop_helper() { [ ${#helpers[@]} -eq 0 ] || { kill "${helpers[@]}" 2>/dev/null; wait "${helpers[@]}" 2>/dev/null; }; helpers=(); }
serve() {            # $1 port, $2 export dir, $3 log[, $4 NAME=VALUE]: one server as served, waits until ready
  env ${4:-OMNI_X=} OMNI_MODELS=$2 OMNI_DEVICE=${DEVICE:-cuda} OMNI_CUDA_GRAPHS=320 GRANIAN_LOOP=uvloop python3 -m granian --workers 1 \
    --host 127.0.0.1 --port $1 --log-level warning app.main:app > $3 2>&1 &
  S=$!
  python3 -c 'import sys, time, urllib.request
for _ in range(900):
    try:
        urllib.request.urlopen("http://127.0.0.1:%s/readyz" % sys.argv[1]).read(); sys.exit(0)
    except Exception:
        time.sleep(0.2)
sys.exit(1)' $1 && return 0
  echo "server on $1 not ready"; tail -20 $3; return 1
}
rounds() {           # $1 port, $2 workload, $3 requests a pass, $4.. modes: c=1, two measured passes each
  local port=$1 w=$2 n=$3; shift 3; local k=0
  for m in "$@"; do
    k=$((k + 1)); start_helper $m
    python3 -m benchmarks.load --url http://127.0.0.1:$port --workload benchmarks/workloads/$w.jsonl \
      --concurrency 1 --requests $n --out $OUT/c1_${w}_${k}_$m.json --label "$w c=1 $m ($k)" | tail -2
    stop_helper
  done
}
both_cua_exports() {  # a fresh machine: ONNX Runtime, wheels, Cua-S1's fp16 export and, once its checkpoint is written, the bfloat16 one beside it
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > /tmp/omni/prepare-cua-s1.log 2>&1 &
  until grep -q '^random checkpoint' /tmp/omni/prepare-cua-s1.log 2>/dev/null; do sleep 2; done
  OUT=/tmp/omni-out DTYPE=bfloat16 EX_SUFFIX=-bf16 KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh \
    prepare cua-s1 > /tmp/omni/prepare-cua-s1-bf16.log 2>&1
  wait
}
case $phase in
prep)
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni-out /tmp/omni
  rm -f /tmp/omni/cua-*.done
  # The bfloat16 export starts once the fp16 prepare has written the checkpoint, and runs beside it.
  OUT=/tmp/omni-out setsid nohup bash -c "KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 \
    > /tmp/omni/prepare-cua-s1.log 2>&1; touch /tmp/omni/cua-fp16.done" > /dev/null 2>&1 &
  OUT=/tmp/omni-out setsid nohup bash -c "until grep -q '^random checkpoint' /tmp/omni/prepare-cua-s1.log 2>/dev/null; do sleep 2; done; \
    DTYPE=bfloat16 EX_SUFFIX=-bf16 KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 \
    > /tmp/omni/prepare-cua-s1-bf16.log 2>&1; touch /tmp/omni/cua-bf16.done" > /dev/null 2>&1 &
  EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -3
  echo "laya ready after $(( $(date +%s) - t0 )) s" ;;
wake)
  # What the kernel does with an idle core here: its cpuidle driver and states, and the QoS device.
  { cat /proc/cmdline; ls /sys/devices/system/cpu/cpuidle/ && cat /sys/devices/system/cpu/cpuidle/current_*
    for st in /sys/devices/system/cpu/cpu0/cpuidle/state*; do echo "$st $(cat $st/name) latency=$(cat $st/latency)"; done
    ls -la /dev/cpu_dma_latency; nproc; } > $OUT/idle.txt 2>&1; cat $OUT/idle.txt
  for _ in $(seq 1 100); do [ -f /tmp/omni/cua-fp16.done ] && [ -f /tmp/omni/cua-bf16.done ] && break; sleep 5; done
  for f in /tmp/omni/prepare-cua-s1.log /tmp/omni/prepare-cua-s1-bf16.log; do grep -v -i warn $f | tail -3; cp $f $OUT/; done
  cp /tmp/omni-out/export-*.log $OUT/ 2>/dev/null; df -h /tmp | tail -1
  serve 18090 /tmp/omni/ex-mha16 $OUT/server-laya.log || exit 1
  rounds 18090 laya_48 400 ${MODES:-plain burn qos qos burn plain}
  k=0
  for m in ${MODES64:-plain burn qos qos burn plain}; do
    k=$((k + 1)); start_helper $m
    python3 -m benchmarks.load --url http://127.0.0.1:18090 --workload benchmarks/workloads/laya_48.jsonl \
      --concurrency 1,8,16,64 --out $OUT/all_${k}_$m.json --label "laya_48 $m" | tail -5
    python3 -m benchmarks.loop_profile --url http://127.0.0.1:18090 --pid $S --no-spy --seconds 8 \
      --workload benchmarks/workloads/laya_48.jsonl --out $OUT/cpu_${k}_$m.json | head -2
    stop_helper
  done
  python3 -m benchmarks.scrape http://127.0.0.1:18090 > $OUT/metrics-laya.txt || true
  kill $S; wait $S 2>/dev/null
  # The server's own setting (app/cpu_latency.py), which holds what the qos helper held.
  serve 18092 /tmp/omni/ex-mha16 $OUT/server-laya-qset.log OMNI_CPU_DMA_LATENCY_US=0 || exit 1
  grep -h "wake-up latency\|CPU_DMA" $OUT/server-laya-qset.log
  rounds 18092 laya_48 400 qset qset
  python3 -m benchmarks.load --url http://127.0.0.1:18092 --workload benchmarks/workloads/laya_48.jsonl \
    --concurrency 1,8,16,64 --out $OUT/all_qset.json --label "laya_48 qset" | tail -5
  python3 -m benchmarks.loop_profile --url http://127.0.0.1:18092 --pid $S --no-spy --seconds 8 \
    --workload benchmarks/workloads/laya_48.jsonl --out $OUT/cpu_qset.json | head -2
  kill $S; wait $S 2>/dev/null ;;
cuaprep|cua)
  if [ $phase = cuaprep ]; then    # a fresh machine: ONNX Runtime, wheels and both Cua-S1 exports first
    both_cua_exports
    for f in /tmp/omni/prepare-cua-s1.log /tmp/omni/prepare-cua-s1-bf16.log; do grep -v -i warn $f | tail -2; cp $f $OUT/; done
    echo "exports ready after $(( $(date +%s) - t0 )) s"
  fi
  OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf SERVES="fp16 bf16:K=/tmp/omni/ex-cua-s1-bf16-gdnf" WORKLOADS=cua_218 \
    CONCURRENCY=1,8,16,64 REQUESTS=200 GRANIAN_LOOP=uvloop bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 \
    | grep -v -i warn | tail -40
  grep -h "GatedDeltaNet\|ready on" $OUT/server-cua-s1-*.log | head -6
  serve 18091 /tmp/omni/ex-cua-s1-gdnf $OUT/server-cua-wake.log || exit 1
  rounds 18091 cua_218 200 ${MODES:-plain burn qos qos burn plain}
  kill $S; wait $S 2>/dev/null ;;
bf16)
  # A fresh machine: why a bfloat16 Cua-S1 pass takes ~1.9x the fp16 one. Both exports, then each
  # one's nodes the CUDA provider did not take, and one pass's kernels at 1 and 8 rows (pass_probe).
  both_cua_exports
  echo "exports ready after $(( $(date +%s) - t0 )) s"
  for ex in /tmp/omni/ex-cua-s1-gdnf /tmp/omni/ex-cua-s1-bf16-gdnf; do
    tag=$(basename $ex)
    python3 - $ex > $OUT/placement-$tag.txt 2>&1 <<'PY'
import collections, re, sys
import onnx
import onnxruntime as ort
from models import onnx_ops
ort.preload_dlls()
path = sys.argv[1] + "/model.onnx"
ops = collections.Counter((n.domain or "ai.onnx", n.op_type) for n in onnx.load(path, load_external_data=False).graph.node)
print("graph ops:", dict(ops))
o = ort.SessionOptions(); o.log_severity_level = 0; o.log_verbosity_level = 0
with onnx_ops.gdn_plan("chunked_split" if "bf16" not in path else "auto"):
    s = ort.InferenceSession(path, o, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
print("session providers:", s.get_providers())
PY
    echo "== $tag"; grep "graph ops\|session providers\|placed on \[" $OUT/placement-$tag.txt | sed 's/.*\] //' | cut -c1-1200
    awk '/placed on \[/{show = /CPUExecutionProvider/} show' $OUT/placement-$tag.txt | sed 's/.*\] //' | head -40
  done
  for ex in /tmp/omni/ex-cua-s1-gdnf /tmp/omni/ex-cua-s1-bf16-gdnf; do
    python3 -m benchmarks.gpu.pass_probe --export $ex --workload benchmarks/workloads/cua_218.jsonl --rows 1,8 \
      --iters 40 --warmup 5 --top 25 --out $OUT/pass-$(basename $ex).json 2>&1 | grep -v -i warn | tail -4
  done ;;
clef)
  # A fresh machine: Clef-Flash 9B (fp16, gdnf) through the served code (RSGI, micro-batches,
  # tokenizer pool), last measured before them (2026-11-30 evening).
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  OUT=$OUT KERNELS=gdnf SKIP_WHEELS=1 timeout 430 bash benchmarks/gpu/qwen_h200.sh prepare clef-flash 2>&1 \
    | grep -v -i warn | tail -4
  echo "export ready after $(( $(date +%s) - t0 )) s"
  OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf WORKLOADS="clef_1q clef_4q clef_16q" CONCURRENCY=1,8,16 REQUESTS=64 \
    LOAD_ARGS="--warmup 32" GRANIAN_LOOP=uvloop timeout $(( 585 - $(date +%s) + t0 )) \
    bash benchmarks/gpu/qwen_h200.sh bench clef-flash 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB" ;;
esac
echo "$phase $(( $(date +%s) - t0 )) s"
