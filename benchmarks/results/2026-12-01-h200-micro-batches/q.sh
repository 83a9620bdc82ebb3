#!/usr/bin/env bash
# One-GPU machine: pinned host buffers for Laya's CUDA-graph replays, micro-batches that answer
# their requests as they end (Open-Jev 9B noul mix), and the 1,024-token Laya variants' graphs.
# After the ort-gpu-carry calls, one call per phase:
#   q.sh $OUT prep    ONNX Runtime and wheels; Open-Jev 9B (gdnf) prepared in the background while
#                     Laya english's checkpoint and fp16 export are built; then waits for Open-Jev
#   q.sh $OUT probe   pass_probe, Laya fp16 at 1, 8 and 16 laya_48 rows, OMNI_PINNED_HOST_BUFFERS
#                     on and off alternated (PINS, "1 0 0 1"), one process each
#   q.sh $OUT laya    laya_h200.sh bench, laya_48, servers with pinned buffers on and off (ORDER)
#   q.sh $OUT jev     qwen_h200.sh bench open-jev, open_jev_noul at c=1, 4 and 16: main before the
#                     change (.base/main = git archive 5d1eb97 app models) and the branch (ORDER)
#   q.sh $OUT typed   a full-size random typed-decisions Laya (1,024 tokens), its fp16 export, and
#                     graph_cost_probe over every shape it captures as it loads
#   q.sh $OUT lprep   (a later lease) ONNX Runtime, wheels and the Laya english fp16 export alone
#   q.sh $OUT gil     laya_48 on servers with OMNI_GIL_SWITCH_INTERVAL_MS in ORDER (default
#                     "5 1 0.5 0.5 1 5"; 5 is Python's own), each pass's session-run time
#                     (omni_batch_forward_seconds) beside it; then pass_probe's GPU time at 16-32 rows
#   q.sh $OUT direct  laya_48 on main before the direct route (.base/head = git archive 1c00cbd app
#                     models) and after it (the working tree), in ORDER ("direct head head direct")
# Only a few files come back from a call, so each phase returns one archive.
R=$1; phase=$2; mkdir -p $R/$phase; t0=$(date +%s)
trap 'tar -C $R -czf $R/$phase.tgz $phase && rm -rf $R/$phase' EXIT
trap 'exit 143' TERM
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/$phase
case $phase in
prep)
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 DETACH=1 bash benchmarks/gpu/qwen_h200.sh prepare open-jev
  EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -3
  echo "laya ready after $(( $(date +%s) - t0 )) s"
  WAIT_S=$(( 540 - ($(date +%s) - t0) )) bash benchmarks/gpu/qwen_h200.sh wait open-jev
  cp /tmp/omni/prepare-open-jev.log /tmp/omni-out/export-*.log $OUT/ 2>/dev/null ;;
probe)
  nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee $OUT/gpu.csv
  for p in ${PINS:-1 0 0 1}; do
    echo "== OMNI_PINNED_HOST_BUFFERS=$p"
    OMNI_PINNED_HOST_BUFFERS=$p python3 -m benchmarks.gpu.pass_probe --export /tmp/omni/ex-mha16 \
      --workload benchmarks/workloads/laya_48.jsonl --rows 1,8,16 --iters 300 --top 3 \
      --out $OUT/probe-pinned$p-$(date +%s).json 2>&1 | grep -v -i warn | head -12
  done ;;
laya)
  S=""; k=0
  for p in ${ORDER:-1 0 0 1}; do
    k=$((k + 1)); S="$S mha16:320::uvloop::R=$k,OMNI_PINNED_HOST_BUFFERS=$p"
  done
  SERVERS="$S" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn ;;
jev)
  S=""; k=0
  for c in ${ORDER:-head branch branch head}; do
    k=$((k + 1))
    case $c in head) S="$S head$k:CODE=.base/main" ;; branch) S="$S branch$k" ;; fifo) S="$S fifo$k:CODE=.base/fifo" ;; esac
  done
  OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf SERVES="$S" WORKLOADS=open_jev_noul CONCURRENCY=${CONC:-1,4,16} REQUESTS=48 \
    LOAD_ARGS="--warmup 96 --per-request" GRANIAN_LOOP=uvloop bash benchmarks/gpu/qwen_h200.sh bench open-jev 2>&1 \
    | grep -v -i warn | tail -40 ;;
lprep)
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -3 ;;
gil)
  S=""; k=0
  for g in ${ORDER:-5 1 0.5 0.5 1 5}; do
    k=$((k + 1)); S="$S mha16:320::uvloop::R=$k,OMNI_GIL_SWITCH_INTERVAL_MS=$g"
  done
  SERVERS="$S" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn
  python3 -m benchmarks.gpu.pass_probe --export /tmp/omni/ex-mha16 --workload benchmarks/workloads/laya_48.jsonl \
    --rows 16,20,24,28,32 --iters 100 --out $OUT/probe-rows.json 2>&1 | grep -v -i warn | head -8 ;;
direct)
  S=""; k=0
  for c in ${ORDER:-direct head head direct}; do
    k=$((k + 1))
    case $c in head) S="$S mha16:320::uvloop:.base/head:R=$k" ;; direct) S="$S mha16:320::uvloop::R=$k" ;; esac
  done
  SERVERS="$S" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn ;;
typed)
  CK=/tmp/omni/ck-typed
  python3 -m models.laya.random_checkpoint $CK --variant typed-decisions --size full | tail -1
  python3 -m models.export laya --checkpoint $CK --out /tmp/omni/ex-typed16 --attention mha --dtype float16 \
    > $OUT/export-typed16.log 2>&1; tail -2 $OUT/export-typed16.log
  echo "typed export ready after $(( $(date +%s) - t0 )) s"
  python3 -m benchmarks.gpu.graph_cost_probe --export /tmp/omni/ex-typed16 --iters ${ITERS:-5} --settle 0.1 \
    --out $OUT/graph-cost-typed.json 2>&1 | grep -v -i warn | tail -${TAIL:-20} ;;
esac
echo "$phase $(( $(date +%s) - t0 )) s"
