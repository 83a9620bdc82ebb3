#!/usr/bin/env bash
# Cua-S1 4B fp16 (gated_delta_net_fused, system turn baked) from one full-size random checkpoint,
# exported twice side by side by this tree: "fp16" (products in fp16, as served) and "fp8"
# (--products fp8: models/fp8.py). After the ort-gpu-carry calls, one call per phase, back to back:
#   p.sh $OUT prep    ONNX Runtime and wheels; the checkpoint; both exports, each with its parity
#                     gate against float32 on CUDA (recorded: random full-size weights); gemm_probe's
#                     fast against precise FP8 accumulation at one row and eight
#   p.sh $OUT bench   pass_probe at 1 and 8 rows of cua_218 on both; then both served in turn, twice
#                     (RSGI, as served): cua_218 at c=1 and 16, 200 requests a pass
R=$1; phase=$2; mkdir -p $R/$phase; t0=$(date +%s)
trap 'tar -C $R -czf $R/$phase.tgz $phase && rm -rf $R/$phase' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/$phase
HALF=/tmp/omni/ex-cua-s1-gdnf EIGHT=/tmp/omni/ex-cua-s1-fp8-gdnf
case $phase in
prep)
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni /tmp/omni-out /tmp/omni-out-fp8
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $OUT/prepare-fp16.log 2>&1 &
  until grep -q '^random checkpoint' $OUT/prepare-fp16.log 2>/dev/null; do sleep 2; done
  OUT=/tmp/omni-out-fp8 EX_SUFFIX=-fp8 PRODUCTS=fp8 KERNELS=gdnf SKIP_WHEELS=1 \
    bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $OUT/prepare-fp8.log 2>&1
  wait
  for f in $OUT/prepare-*.log; do echo "== $f"; grep -v -i warn $f | tail -2; done
  cp /tmp/omni-out/export-*.log $OUT/export-fp16.log; cp /tmp/omni-out-fp8/export-*.log $OUT/export-fp8.log
  grep -h "FP8\|parity" $OUT/export-fp8.log | head -4
  for ex in $HALF $EIGHT; do
    cp $ex/manifest.json $OUT/manifest-$(basename $ex).json
    python3 -c 'import json, sys; m = json.load(open(sys.argv[1] + "/manifest.json"))
g = m["check"].get("parity_gate", {}); print(sys.argv[1], {k: g.get(k) for k in ("passes", "max_prob_drift",
  "top_choice_identical", "final_hidden_rel_err", "device", "not_run")}, {k: v for k, v in m["graph"].items() if "fp8" in k})' $ex
  done
  echo "prepared $(( $(date +%s) - t0 )) s"
  python3 -m benchmarks.gpu.gemm_probe --rows 144,1152 --forms matmul3d,gemm8,gemm8_precise --copies 8 --iters 20 \
    --out $OUT/gemm-accumulation.json 2>&1 | grep -v -i warn | tee $OUT/gemm-accumulation.txt | grep predicted
  echo "probed $(( $(date +%s) - t0 )) s" ;;
bench)
  nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee $OUT/gpu.csv
  for ex in $HALF $EIGHT; do
    python3 -m benchmarks.gpu.pass_probe --export $ex --workload benchmarks/workloads/cua_218.jsonl --rows 1,8 \
      --iters 30 --warmup 3 --out $OUT/pass-$(basename $ex).json 2>&1 | grep -v -i warn | grep -E "rows|rror" | tail -2
  done
  OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf WORKLOADS=cua_218 CONCURRENCY=1,16 REQUESTS=200 \
    SERVES="fp16:K=$HALF fp8:K=$EIGHT fp16b:K=$HALF fp8b:K=$EIGHT" timeout 400 \
    bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB|rror"
  grep -h -i "Traceback\|error" $OUT/server-*.log | head -5
  echo "done $(( $(date +%s) - t0 )) s" ;;
esac
