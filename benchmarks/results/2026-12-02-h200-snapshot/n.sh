#!/usr/bin/env bash
# Snapshot session (2026-12-02): every model the one-GPU machine holds, as served at this tree, in
# one lease on one host: the figures the report's "where we stand" quotes, side by side. The 9B
# checkpoint is described, not written (DESCRIBED=1: its weights drawn as each export loads them),
# so the Cua-S1, Open-Jev 9B, Clef-Flash and Laya exports fit the disk together. After the
# ort-gpu-carry calls, one call per step, back to back:
#   n.sh $OUT prep     ONNX Runtime, wheels; in parallel: Laya english (fp16 mha), Cua-S1 4B (fp16 gdnf,
#                      written checkpoint: the HF baseline reads it), the described 9B, then Open-Jev 9B
#                      and Clef-Flash 9B (fp16 gdnf) from it
#   n.sh $OUT laya     one Laya server as served: laya_48 and laya_spread at c=1, 8, 16, 64 (per-request
#                      records), laya_3q at c=1 and 16, CPU a request at c=64; then in-process against the
#                      laya package's Agent on CUDA
#   n.sh $OUT cua      in-process against HF transformers eager bf16 (218 tokens, qwen_bench); one server:
#                      cua_218 at c=1, 8, 16, 64 (per-request records)
#   n.sh $OUT clefprep the Clef-Flash export again (prep's had failed: its head's lm_head was read
#                      from shards only; fixed before this call)
#   n.sh $OUT qwen9    one server each: Open-Jev 9B's noul mix at c=1, 4, 16 (96 warm-up requests), then
#                      Clef-Flash's clef_1q at c=1, 8, 16 and clef_4q at c=1 and 8 (32 warm-up requests)
# Then, in the same lease, the 27B on this one-GPU machine (run by hand as these three steps; no
# tarball for the first two):
#   n.sh $OUT j27      everything above removed from /tmp/omni; the described 27B and its fp16 gdnf
#                      export started in the background (393 s); waits 45 s
#   n.sh $OUT wait27   follows the export's log until it is done (up to 540 s)
#   n.sh $OUT bench27  one server: the 27B noul mix at c=1, 4, 16 (96 warm-up requests)
# A second lease, after 798a308 (descriptions name their generator's device; Clef-Flash's head
# draws only its own tensor), on a fresh host:
#   n.sh $OUT prep2    ONNX Runtime, wheels; in parallel: Laya english (fp16 mha) and Cua-S1 4B from a
#                      described checkpoint (fp16 gdnf)
#   n.sh $OUT bench2   one Laya server: laya_48 at c=1, 64, 1, 64 (two measured passes each); then one Cua-S1
#                      server of the described export: cua_218 at c=1 and 16
R=$1; STEP=$2; mkdir -p $R/n; t0=$(date +%s)
trap 'tar -C $R -czf $R/n-$STEP.tgz n && rm -rf $R/n' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD GRANIAN_LOOP=uvloop
case $STEP in
prep)
  bash .ortgpu/5/install.sh > $R/n/ort-install.log 2>&1; tail -1 $R/n/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni /tmp/omni-out; df -h /tmp | tail -1; nproc; free -g | head -2
  Q="OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1"
  (env $Q bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $R/n/prepare-cua.log 2>&1) &
  (OUT=/tmp/omni-out EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare > $R/n/prepare-laya.log 2>&1) &
  (env $Q DESCRIBED=1 bash benchmarks/gpu/qwen_h200.sh prepare open-jev > $R/n/prepare-jev.log 2>&1) &
  # Clef-Flash links the described checkpoint's files: wait for its config.json, written last.
  (for _ in $(seq 1 120); do [ -f /tmp/omni/ck-9b-described/config.json ] && break; sleep 2; done
   env $Q DESCRIBED=1 bash benchmarks/gpu/qwen_h200.sh prepare clef-flash > $R/n/prepare-clef.log 2>&1) &
  wait
  cp /tmp/omni-out/export-*.log $R/n/ 2>/dev/null
  for f in $R/n/prepare-*.log; do echo "== $f"; grep -v -i warn $f | tail -3; done
  du -sh /tmp/omni/*; df -h /tmp | tail -1
  echo "prepared $(( $(date +%s) - t0 )) s" ;;
laya)
  OUT=$R/n EXPORTS="mha16=mha:float16" SERVERS="mha16:320" WORKLOADS1Q="laya_spread laya_48" WORKLOADS3Q="mha16:320" \
    INPROCESS=1 LOAD_ARGS=--per-request timeout ${LIMIT:-540} bash benchmarks/gpu/laya_h200.sh bench 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|port|CPU|MiB|rror|laya|mha16|p50" | head -50
  grep -h "event loop" $R/n/server-*.log | sed 's/^.*INFO //' | sort | uniq -c
  echo "done $(( $(date +%s) - t0 )) s" ;;
cua)
  OUT=$R/n INPROCESS=1 KERNELS=gdnf WORKLOADS=cua_218 CONCURRENCY=1,8,16,64 REQUESTS=200 LOAD_ARGS=--per-request \
    BENCH_ARGS="--lengths 218 --gdn-plans chunked_split --parity-prompts 8" BENCH_TAIL=12 \
    timeout ${LIMIT:-540} bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB|rror|218|hf|HF|gdnf"
  echo "done $(( $(date +%s) - t0 )) s" ;;
clefprep)   # prep's Clef-Flash export had failed: its head's lm_head was read from shards only
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 DESCRIBED=1 timeout 560 bash benchmarks/gpu/qwen_h200.sh prepare clef-flash \
    > $R/n/prepare-clef.log 2>&1; cp /tmp/omni-out/export-clef*.log $R/n/
  grep -v -i warn $R/n/prepare-clef.log | tail -3; echo "done $(( $(date +%s) - t0 )) s" ;;
qwen9)
  OUT=$R/n DESCRIBED=1 KERNELS=gdnf WORKLOADS=open_jev_noul CONCURRENCY=1,4,16 REQUESTS=48 \
    LOAD_ARGS="--warmup 96 --per-request" timeout 300 bash benchmarks/gpu/qwen_h200.sh bench open-jev 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|MiB|rror"
  echo "open-jev $(( $(date +%s) - t0 )) s"
  OUT=$R/n DESCRIBED=1 KERNELS=gdnf WORKLOADS="clef_1q clef_4q" CONCURRENCY=1,8,16 REQUESTS=64 \
    LOAD_ARGS="--warmup 32 --per-request" timeout $(( 570 - $(date +%s) + t0 )) bash benchmarks/gpu/qwen_h200.sh bench clef-flash 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|MiB|rror"
  echo "done $(( $(date +%s) - t0 )) s" ;;
prep2)
  bash .ortgpu/5/install.sh > $R/n/ort-install.log 2>&1; tail -1 $R/n/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni /tmp/omni-out
  (OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 DESCRIBED=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $R/n/prepare-cua.log 2>&1) &
  (OUT=/tmp/omni-out EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare > $R/n/prepare-laya.log 2>&1) &
  wait; cp /tmp/omni-out/export-*.log $R/n/ 2>/dev/null; cp /tmp/omni/ck-4b-described/random_weights.json $R/n/
  for f in $R/n/prepare-*.log; do echo "== $f"; grep -v -i warn $f | tail -3; done
  echo "prepared $(( $(date +%s) - t0 )) s" ;;
bench2)
  OUT=$R/n EXPORTS="mha16=mha:float16" SERVERS="mha16:320" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 \
    LOAD_ARGS="--concurrency 1,64,1,64" timeout 240 bash benchmarks/gpu/laya_h200.sh bench 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|port|CPU|rror" | head -20
  OUT=$R/n DESCRIBED=1 KERNELS=gdnf WORKLOADS=cua_218 CONCURRENCY=1,16 REQUESTS=200 timeout 200 \
    bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB|rror"
  echo "done $(( $(date +%s) - t0 )) s" ;;
j27)
  rm -rf /tmp/omni/ex-* /tmp/omni/ck-* /tmp/omni/clef-9b /tmp/omni/pkg-9b; df -h /tmp | tail -1; free -g | head -2
  OUT=/tmp/omni-out JEV=27b DESCRIBED=1 DETACH=1 KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare open-jev
  sleep 45; tail -5 /tmp/omni/prepare-open-jev.log; tail -3 /tmp/omni-out/export-open-jev-gdnf.log ;;
wait27)
  WAIT_S=540 TAIL=8 JEV=27b bash benchmarks/gpu/qwen_h200.sh wait open-jev
  grep -v -i warn /tmp/omni-out/export-open-jev-gdnf.log | tail -4; free -g | head -2 ;;
bench27)
  cp /tmp/omni/prepare-open-jev.log $R/n/prepare-jev27.log; cp /tmp/omni-out/export-open-jev-gdnf.log $R/n/export-open-jev-27b-gdnf.log
  cp /tmp/omni/ex-open-jev-gdnf/manifest.json $R/n/manifest-jev27.json
  OUT=$R/n EX_SUFFIX= JEV=27b DESCRIBED=1 KERNELS=gdnf WORKLOADS=open_jev_noul_27b CONCURRENCY=1,4,16 REQUESTS=48 \
    LOAD_ARGS="--warmup 96 --per-request" SERVES=j27 timeout 420 bash benchmarks/gpu/qwen_h200.sh bench open-jev 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|MiB|rror" ;;
esac
