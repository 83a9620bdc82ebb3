#!/usr/bin/env bash
# One-GPU machine, Laya english fp16 (mha16): what CUDA graphs cost per bucket, and traffic of many
# lengths (laya_spread, rows of 40-479 tokens) against the graph budget. After the ort-gpu-carry calls:
#   k.sh $OUT prep    ONNX Runtime, wheels, a full-size random checkpoint and its export
#   k.sh $OUT probe   benchmarks.gpu.graph_cost_probe over every capturable shape (capture ms, MiB, replay)
#   k.sh $OUT cols    pass_probe, main's 4 marker columns against the branch's 8 (call p)
#   k.sh $OUT bench   laya_h200.sh bench on WORKLOADS (default laya_spread), servers in ORDER, once per
#                     round (RS, "1 2"); configs: main (the working tree, in calls k1/k2 69fff1c's
#                     serving code: 64 graphs), all (the same, 256 graphs),
#                     old (.base/prev = git archive d3147a4 app models: 16-row bound, powers of two),
#                     off (no graphs); after the length split: head (.base/main = git archive 69fff1c app
#                     models, main before it, 64 graphs) and branch (the working tree: passes of like
#                     lengths, 256 graphs, its defaults; in calls n1/n2 also every shape captured as the
#                     model loads and 8 marker columns) and lazy (the branch capturing on first sight)
# Only a few files come back from a call, so each phase returns one archive.
R=$1; phase=$2; mkdir -p $R/$phase; t0=$(date +%s)
trap 'tar -C $R -czf $R/$phase.tgz $phase && rm -rf $R/$phase' EXIT
trap 'exit 143' TERM
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/$phase
case $phase in
prep)
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -3 ;;
probe)
  nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee $OUT/gpu.csv
  python3 -m benchmarks.gpu.graph_cost_probe --export /tmp/omni/ex-mha16 --iters ${ITERS:-10} --settle 0.1 \
    --out $OUT/graph-cost.json 2>&1 | grep -v -i warn | tail -${TAIL:-30} ;;
cols)
  # pass_probe at 1, 8 and 16 laya_48 rows: main (.base/main, 4 marker columns for 3 options) and
  # the branch (8), alternated (CODES, "main branch main branch").
  # Python puts the working directory first on the path, so main's app and models come from
  # running in .base/main (benchmarks/ from this tree, later on the path).
  ROOT=$PWD
  for c in ${CODES:-main branch main branch}; do
    case $c in main) D=.base/main ;; branch) D=. ;; esac
    echo "== $c"
    (cd $D && python3 -c 'import models.laya.adapter as a; print(a.__file__)' && \
     python3 -m benchmarks.gpu.pass_probe --export /tmp/omni/ex-mha16 \
      --workload $ROOT/benchmarks/workloads/laya_48.jsonl --rows 1,8,16 --iters 200 --top 3 \
      --out $OUT/probe-$c-$(date +%s).json 2>&1 | grep -v -i warn | head -10)
  done ;;
bench)
  S=""
  for round in ${RS:-1 2}; do
    k=0
    for c in ${ORDER:-main old all off}; do
      # R (an unused variable) only names the server and its files: round and place.
      k=$((k + 1)); r=${round}_$k
      case $c in
        main) S="$S mha16:64::uvloop::R=$r" ;;
        all) S="$S mha16:256::uvloop::R=$r" ;;
        old) S="$S mha16:64::uvloop:.base/prev:R=$r" ;;
        off) S="$S mha16:0::uvloop::R=$r" ;;
        head) S="$S mha16:64::uvloop:.base/main:R=$r" ;;
        branch) S="$S mha16:256::uvloop::R=$r" ;;
        lazy) S="$S mha16:256::uvloop::R=$r,OMNI_CUDA_GRAPH_PRECAPTURE=0" ;;
      esac
    done
  done
  SERVERS="$S" WORKLOADS1Q="${WORKLOADS:-laya_spread}" WORKLOADS3Q="" INPROCESS=0 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn ;;
esac
echo "$phase $(( $(date +%s) - t0 )) s"
