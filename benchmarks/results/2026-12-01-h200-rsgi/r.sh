#!/usr/bin/env bash
# One-GPU machine: the same app through Granian's RSGI interface (app/rsgi.py, as served now)
# against its ASGI interface, side by side.
# After the ort-gpu-carry calls, one call per phase:
#   r.sh $OUT prep    ONNX Runtime and wheels; Cua-S1 4B (gdnf) prepared in the background while
#                     Laya english's checkpoint and fp16 export are built (CUA=0: Laya alone)
#   r.sh $OUT laya    laya_h200.sh bench, laya_48 at c=1, 8, 16 and 64 and each server's loop CPU a
#                     request at c=64, servers in ORDER (default "rsgi asgi asgi rsgi")
#   r.sh $OUT attr    laya_48 as in `laya` on RSGI and ASGI servers, each in Granian's st and mt
#                     runtime modes (ORDER), then py-spy on an RSGI server's loop at c=64
#   r.sh $OUT gil     laya_48 as in `laya` through RSGI with OMNI_GIL_SWITCH_INTERVAL_MS in ORDER
#                     (default "0 0.2 0.05 0.05 0.2 0"; 0 keeps Python's 5 ms)
#   r.sh $OUT threads py-spy at c=64 on an RSGI server: the executor thread's functions, then the loop's
#   r.sh $OUT tok     (not run yet) laya_48 through RSGI with OMNI_TOKENIZE_OFF_LOOP in ORDER ("1 0 0 1")
#   r.sh $OUT cua     waits for Cua-S1, then qwen_h200.sh bench cua-s1, cua_218 at c=1 and 16,
#                     servers in ORDER (default "rsgi asgi asgi rsgi"), one after another
# Only a few files come back from a call, so each phase returns one archive.
R=$1; phase=$2; mkdir -p $R/$phase; t0=$(date +%s)
trap 'tar -C $R -czf $R/$phase.tgz $phase && rm -rf $R/$phase' EXIT
trap 'exit 143' TERM
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/$phase
case $phase in
prep)
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  [ "${CUA:-1}" = 1 ] && OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 DETACH=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1
  EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -3
  echo "laya ready after $(( $(date +%s) - t0 )) s" ;;
laya)
  # Cua-S1's export must not share the machine with the measurement.
  WAIT_S=300 TAIL=2 bash benchmarks/gpu/qwen_h200.sh wait cua-s1
  S=""; k=0
  for i in ${ORDER:-rsgi asgi asgi rsgi}; do
    k=$((k + 1)); S="$S mha16:320::uvloop::R=$k,GRANIAN_INTERFACE=$i"
  done
  SERVERS="$S" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn ;;
attr)
  # Granian's auto runtime mode is st under RSGI and mt under ASGI: each interface in both modes,
  # then py-spy on the loop of an RSGI server (as served) at c=64.
  S=""; k=0
  for i in ${ORDER:-rsgi rsgi-mt asgi-st asgi asgi-st rsgi-mt}; do
    k=$((k + 1)); mode=; case $i in *-mt) mode=,GRANIAN_RUNTIME_MODE=mt ;; *-st) mode=,GRANIAN_RUNTIME_MODE=st ;; esac
    S="$S mha16:320::uvloop::R=$k,GRANIAN_INTERFACE=${i%-*}$mode"
  done
  SERVERS="$S" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 PROFILE=mha16:320 PROFILE_LINES=70 \
    PROFILE_ARGS="--workload benchmarks/workloads/laya_48.jsonl --seconds 8 --top 40" \
    bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn ;;
gil)
  # Through RSGI, OMNI_GIL_SWITCH_INTERVAL_MS below the 0.5 ms tried before (0: Python's 5 ms).
  S=""; k=0
  for g in ${ORDER:-0 0.2 0.05 0.05 0.2 0}; do
    k=$((k + 1)); S="$S mha16:320::uvloop::R=$k,OMNI_GIL_SWITCH_INTERVAL_MS=$g"
  done
  SERVERS="$S" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn ;;
tok)
  # Not run this session (device time spent): the tokenizer call on a thread of its own, against
  # on the loop, through RSGI (ORDER of OMNI_TOKENIZE_OFF_LOOP values).
  S=""; k=0
  for v in ${ORDER:-1 0 0 1}; do
    k=$((k + 1)); S="$S mha16:320::uvloop::R=$k,OMNI_TOKENIZE_OFF_LOOP=$v"
  done
  SERVERS="$S" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn ;;
threads)
  # py-spy at c=64 on an RSGI server (uvloop, as served): the executor thread's functions, then the loop's.
  for t in omni-executor MainThread; do
    PATH=/tmp/site/bin:$PATH GRANIAN_LOOP=uvloop OMNI_CUDA_GRAPHS=320 python3 -m benchmarks.loop_profile \
      --export /tmp/omni/ex-mha16 --device cuda --workload benchmarks/workloads/laya_48.jsonl --seconds 8 \
      --top 40 --thread $t --out $OUT/profile-$t.json 2>&1 | grep -v -i warn | head -75
  done ;;
cua)
  WAIT_S=300 TAIL=2 bash benchmarks/gpu/qwen_h200.sh wait cua-s1
  cp /tmp/omni/prepare-cua-s1.log /tmp/omni-out/export-*.log $OUT/ 2>/dev/null
  S=""; k=0
  for i in ${ORDER:-rsgi asgi asgi rsgi}; do
    k=$((k + 1)); S="$S $i$k:GRANIAN_INTERFACE=$i"
  done
  OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf SERVES="$S" WORKLOADS=cua_218 CONCURRENCY=${CONC:-1,16} REQUESTS=200 \
    GRANIAN_LOOP=uvloop bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 | grep -v -i warn | tail -40 ;;
esac
echo "$phase $(( $(date +%s) - t0 )) s"
