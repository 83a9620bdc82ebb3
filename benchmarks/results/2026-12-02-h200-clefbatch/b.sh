#!/usr/bin/env bash
# Clef-Flash 9B with several records a pass (export_options.records = "batched"), on one lease
# after the ort-gpu-carry calls. `b.sh $OUT prep`: full-size random checkpoint, fp16 gdnf export
# (batched records), pass_probe at 1, 2, 4 and 8 records without CUDA graphs (ONNX Runtime
# refuses to capture this graph: a first lease found that). `b.sh $OUT bench`: clef_1q at c=1, 8
# and 16 on one server with records batched, then one limited to one record a pass
# (OMNI_MAX_BATCH_ROWS=1: the executor takes one request at a time), both without graphs.
R=$1; STEP=$2; mkdir -p $R/b; t0=$(date +%s)
trap 'tar -C $R -czf $R/b-$STEP.tgz b && rm -rf $R/b' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/b
EX=/tmp/omni/ex-clef-flash-gdnf
if [ "$STEP" = prep ]; then
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  # scratch_clef (not kept): the tiny fp16 gdnf exports, single and batched, and place.py, which
  # opens each as a verbose CUDA session with graphs enabled
  PYTHONPATH=/tmp/ortsite python3 scratch_clef/place.py scratch_clef/single scratch_clef/batched > $OUT/place.log 2>&1
  grep -E "=====|capture OK|FAILED" $OUT/place.log
  mkdir -p /tmp/omni /tmp/omni-out
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare clef-flash > $OUT/prepare.log 2>&1
  grep -v -i warn $OUT/prepare.log | tail -2; cp /tmp/omni-out/export-*.log $OUT/ 2>/dev/null
  cp $EX/manifest.json $OUT/manifest.json
  python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["export_options"])
g = m["check"].get("parity_gate", {}); print({k: g.get(k) for k in ("passes", "max_prob_drift", "top_choice_identical", "device")})' $OUT/manifest.json
  echo "prepared $(( $(date +%s) - t0 )) s"
  OMNI_CUDA_GRAPHS=0 python3 -m benchmarks.gpu.pass_probe --export $EX --workload benchmarks/workloads/clef_1q.jsonl --rows 1,2,4,8 \
    --iters 20 --warmup 3 --out $OUT/pass.json 2>&1 | grep -v -i warn | tail -6
  echo "probed $(( $(date +%s) - t0 )) s"
else
  for w in "clef_1q 1,8,16"; do set -- $w
    OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf WORKLOADS=$1 CONCURRENCY=$2 REQUESTS=64 \
      SERVES="batched-$1 single-$1:OMNI_MAX_BATCH_ROWS=1" \
      LOAD_ARGS="--warmup 16" GRANIAN_LOOP=uvloop timeout ${LIMIT:-300} \
      bash benchmarks/gpu/qwen_h200.sh bench clef-flash 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB|rror"
  done
  grep -h -i "captured CUDA graph\|error\|Traceback" $OUT/server-*.log | sed 's/^.*\] //' | sort | uniq -c | sort -rn | head -8
  echo "done $(( $(date +%s) - t0 )) s"
fi
