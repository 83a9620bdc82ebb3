#!/usr/bin/env bash
# idlespin session (2026-12-02): the executor thread spinning OMNI_EXECUTOR_SPIN_US (2000) after
# its queue runs dry, against sleeping at once (0), on the H200. After the ort-gpu-carry calls:
#   s.sh $OUT prep   ONNX Runtime, wheels; full-size random english Laya (fp16 mha), Cua-S1 and
#                    Open-Jev 9B (fp16 gdnf), the three in parallel
#   s.sh $OUT cua    cua_218 at c=1, 8, 16: servers off, on, off, on, one after another
#   s.sh $OUT jev    open_jev_noul at c=1 and 4 (96-request warm-up): servers off, on, off, on
#   s.sh $OUT laya   laya_48 at c=1-64: four servers side by side (off, on, off, on), loaded in turn
# Every load keeps per-request records (Server-Timing's `queue` is what the spin is for).
R=$1; STEP=$2; mkdir -p $R/s; t0=$(date +%s)
trap 'tar -C $R -czf $R/s-$STEP.tgz s && rm -rf $R/s' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD GRANIAN_LOOP=uvloop
S="off on:OMNI_EXECUTOR_SPIN_US=2000 off2 on2:OMNI_EXECUTOR_SPIN_US=2000"
case $STEP in
prep)
  bash .ortgpu/5/install.sh > $R/s/ort-install.log 2>&1; tail -1 $R/s/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni /tmp/omni-out
  (OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $R/s/prepare-cua.log 2>&1) &
  (OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare open-jev > $R/s/prepare-jev.log 2>&1) &
  (OUT=/tmp/omni-out EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare > $R/s/prepare-laya.log 2>&1) &
  wait
  for f in $R/s/prepare-*.log; do grep -v -i warn $f | tail -2; done
  echo "prepared $(( $(date +%s) - t0 )) s" ;;
cua)
  OUT=$R/s INPROCESS=0 KERNELS=gdnf WORKLOADS=cua_218 CONCURRENCY=1,8,16 REQUESTS=400 LOAD_ARGS=--per-request SERVES="$S" \
    timeout ${LIMIT:-400} bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB|rror|serve"
  echo "done $(( $(date +%s) - t0 )) s" ;;
jev)
  OUT=$R/s INPROCESS=0 HF=0 KERNELS=gdnf WORKLOADS=open_jev_noul CONCURRENCY=1,4 REQUESTS=48 SERVES="$S" \
    LOAD_ARGS="--warmup 96 --per-request" timeout ${LIMIT:-400} bash benchmarks/gpu/qwen_h200.sh bench open-jev 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB|rror|serve"
  echo "done $(( $(date +%s) - t0 )) s" ;;
laya)
  OUT=$R/s EXPORTS="mha16=mha:float16" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 LOAD_ARGS=--per-request \
    SERVERS="mha16:320 mha16:320::::OMNI_EXECUTOR_SPIN_US=2000 mha16:320:19 mha16:320:19:::OMNI_EXECUTOR_SPIN_US=2000" \
    timeout ${LIMIT:-500} bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn | grep -E "c=|ready|port|CPU|rror" | head -40
  echo "done $(( $(date +%s) - t0 )) s" ;;
esac
