#!/usr/bin/env bash
# uvloop session (2026-12-02): the cudasync session's u.sh (written there, not run), run on the
# H200 with two additions: cua_218 with per-request records, and tokhop.py (the tokenizer's
# hop to its thread pool after a sleep) on the machine's CPU. After the ort-gpu-carry calls:
#   u.sh $OUT prep    ONNX Runtime, wheels; full-size random english Laya (fp16 mha) and Cua-S1 (fp16 gdnf)
#   u.sh $OUT laya    tokhop.py; laya_48, four Laya servers side by side on uvloop, loaded in turn:
#                     OMNI_GC_FREEZE on, off, on, off; per-request records; each server's full collections
#   u.sh $OUT cua     cua_218 at c=1, 8, 16, 64 on uvloop, one server, per-request records
# Questions: does Laya reach 5,000/s at c=64 again on uvloop (the wake session's 4,557-5,706)?
# Is the c=64 p99 back near the p95 (no groups of ~64 stalled requests in the per-request
# records)? Does the GC freeze still matter there (omni_gc_full_collection_seconds)?
R=$1; STEP=$2; mkdir -p $R/u; t0=$(date +%s); D=benchmarks/results/2026-12-02-h200-uvloop
trap 'tar -C $R -czf $R/u-$STEP.tgz u && rm -rf $R/u' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD GRANIAN_LOOP=uvloop
case $STEP in
prep)
  bash .ortgpu/5/install.sh > $R/u/ort-install.log 2>&1; tail -1 $R/u/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni /tmp/omni-out
  (OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $R/u/prepare-cua.log 2>&1) &
  (OUT=/tmp/omni-out EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare > $R/u/prepare-laya.log 2>&1) &
  wait
  for f in $R/u/prepare-*.log; do grep -v -i warn $f | tail -2; done
  echo "prepared $(( $(date +%s) - t0 )) s" ;;
laya)
  for s in 0 6.5; do python3 $D/tokhop.py $s 1000; TOKENIZERS_PARALLELISM=false python3 $D/tokhop.py $s 1000; done 2>&1 | tee $R/u/tokhop.txt
  OUT=$R/u EXPORTS="mha16=mha:float16" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 LOAD_ARGS=--per-request \
    SERVERS="mha16:320 mha16:320::::OMNI_GC_FREEZE=0 mha16:320:19 mha16:320:19:::OMNI_GC_FREEZE=0" \
    timeout ${LIMIT:-500} bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn | grep -E "c=|ready|port|CPU|rror" | head -40
  grep -h "event loop" $R/u/server-*.log | sed 's/^.*INFO //' | sort | uniq -c
  grep -H "omni_gc_full_collection_seconds_\(count\|sum\)" $R/u/metrics_*.txt
  echo "done $(( $(date +%s) - t0 )) s" ;;
cua)
  OUT=$R/u INPROCESS=0 KERNELS=gdnf WORKLOADS=cua_218 CONCURRENCY=1,8,16,64 REQUESTS=200 LOAD_ARGS=--per-request \
    timeout ${LIMIT:-400} bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB|rror"
  grep -h "event loop" $R/u/server-*.log | sed 's/^.*INFO //' | sort | uniq -c
  echo "done $(( $(date +%s) - t0 )) s" ;;
esac
