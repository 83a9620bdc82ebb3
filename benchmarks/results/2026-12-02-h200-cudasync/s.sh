#!/usr/bin/env bash
# The cudasync session (2026-12-02): does the executor thread sleep through a pass in ONNX
# Runtime's synchronize, and does spinning there (OMNI_CUDA_SYNC=spin) shorten c=1? After the
# ort-gpu-carry calls:
#   s.sh $OUT prep    ONNX Runtime, wheels; sync_probe (every CUDA scheduling mode, twice);
#                     full-size random Cua-S1 (fp16 gdnf) and english Laya (fp16 mha) exports, in parallel
#   s.sh $OUT cua     cua_218 at c=1 and 16, one server at a time: auto, spin, auto, spin, or SERVES_CUA
#                     (as run: SERVES_CUA="auto blocking:OMNI_CUDA_SYNC=blocking auto2 blocking2:OMNI_CUDA_SYNC=blocking")
# Then, in a second lease, the baselines beside this tree as served (no OMNI_CUDA_SYNC):
#   PROBE=0 s.sh $OUT prep
#   s.sh $OUT cuabase   in-process: HF transformers eager bf16 against our export at 218 tokens
#                       (qwen_bench); then cua_218 over HTTP at c=1, 8, 16, 64
#   s.sh $OUT layabase  in-process: the laya package's Agent on CUDA against our export (inprocess);
#                       then laya_48 over HTTP at c=1, 8, 16, 64 and CPU a request at c=64
# A third lease, after qwen_bench ran a baked-head export on 218 tokens after its head while
# transformers ran 218 in all (fixed since), and with the load's per-request send times:
#   PROBE=0 s.sh $OUT prep
#   s.sh $OUT cuafair   qwen_bench at 218 tokens, both engines on the same prompts, parity included
#   s.sh $OUT layap99   laya_48 at c=1-64, one server, each request's send time and Server-Timing kept
# A fourth lease, after layap99 found every request in flight stalled together by 75-115 ms, and
# the server's full collections at 20 ms-1 s each on the H200 (0.6 ms on the development machine):
#   s.sh $OUT gcdiag    ONNX Runtime, wheels, the english Laya export, then one server with
#                       benchmarks/gc_trace logging each full collection, laya_48 at c=64
R=$1; STEP=$2; mkdir -p $R/s; t0=$(date +%s)
trap 'tar -C $R -czf $R/s-$STEP.tgz s && rm -rf $R/s' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
case $STEP in
prep)
  bash .ortgpu/5/install.sh > $R/s/ort-install.log 2>&1; tail -1 $R/s/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  [ "${PROBE:-1}" = 0 ] || timeout 240 python3 -m benchmarks.gpu.sync_probe --out $R/s/sync_probe.json 2>&1 | grep -v -i warn | tail -14
  echo "probed $(( $(date +%s) - t0 )) s"
  mkdir -p /tmp/omni /tmp/omni-out
  (OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $R/s/prepare-cua.log 2>&1) &
  (OUT=/tmp/omni-out EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare > $R/s/prepare-laya.log 2>&1) &
  wait
  for f in $R/s/prepare-*.log; do grep -v -i warn $f | tail -2; done
  echo "prepared $(( $(date +%s) - t0 )) s" ;;
cua)
  OUT=$R/s INPROCESS=0 HF=0 KERNELS=gdnf WORKLOADS=cua_218 CONCURRENCY=1,16 REQUESTS=200 \
    SERVES="${SERVES_CUA:-auto spin:OMNI_CUDA_SYNC=spin auto2 spin2:OMNI_CUDA_SYNC=spin}" \
    timeout ${LIMIT:-500} bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB|rror"
  grep -h "waits for the GPU" $R/s/server-*.log | sed 's/^.*\] //' | head -2
  echo "done $(( $(date +%s) - t0 )) s" ;;
cuabase)
  OUT=$R/s INPROCESS=1 KERNELS=gdnf WORKLOADS=cua_218 CONCURRENCY=1,8,16,64 REQUESTS=200 SERVES=head \
    BENCH_ARGS="--lengths 218 --gdn-plans chunked_split --parity-prompts 8" BENCH_TAIL=12 \
    timeout ${LIMIT:-540} bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB|rror|218|hf|HF|gdnf"
  echo "done $(( $(date +%s) - t0 )) s" ;;
gcdiag)
  bash .ortgpu/5/install.sh > $R/s/ort-install.log 2>&1; tail -1 $R/s/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni
  OUT=/tmp/omni-out EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare > $R/s/prepare-laya.log 2>&1
  echo "prepared $(( $(date +%s) - t0 )) s"
  GC_TRACE_LOG=$R/s/gc PYTHONPATH=$PWD/benchmarks/gc_trace:$PYTHONPATH OMNI_MODELS=/tmp/omni/ex-mha16 OMNI_DEVICE=cuda \
    GRANIAN_INTERFACE=rsgi python3 -m granian --workers 1 --host 127.0.0.1 --port 18090 --log-level warning app.main:app \
    > $R/s/server-gc.log 2>&1 &
  S=$!
  for _ in $(seq 1 300); do curl -sf http://127.0.0.1:18090/readyz > /dev/null && break; sleep 0.2; done
  echo "ready $(( $(date +%s) - t0 )) s"
  timeout 60 python3 -m benchmarks.load --url http://127.0.0.1:18090 --workload benchmarks/workloads/laya_48.jsonl \
    --concurrency 64 --requests 6400 --per-request --out $R/s/http-gc.json --label "gc trace" | grep "c="
  curl -s http://127.0.0.1:18090/metrics > $R/s/metrics-gc.txt; kill $S
  cut -c1-400 $R/s/gc.* | tail -30
  echo "done $(( $(date +%s) - t0 )) s" ;;
cuafair)
  OUT=$R/s INPROCESS=1 KERNELS=gdnf BENCH_ARGS="--lengths 218 --gdn-plans chunked_split --parity-prompts 8" BENCH_TAIL=12 \
    timeout ${LIMIT:-400} bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 | grep -v -i warn | grep -E "rror|218|parity|gdnf"
  echo "done $(( $(date +%s) - t0 )) s" ;;
layap99)
  OUT=$R/s EXPORTS="mha16=mha:float16" SERVERS="mha16:320" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 LOAD_ARGS=--per-request \
    timeout ${LIMIT:-300} bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn | grep -E "c=|ready|port|CPU|rror" | head -20
  echo "done $(( $(date +%s) - t0 )) s" ;;
layabase)
  OUT=$R/s EXPORTS="mha16=mha:float16" SERVERS="mha16:320" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=1 \
    timeout ${LIMIT:-540} bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn | grep -E "c=|ready|port|CPU|MiB|rror|laya|mha16|p50" | head -40
  echo "done $(( $(date +%s) - t0 )) s" ;;
esac
