#!/usr/bin/env bash
# Clef-Flash 9B fp16 (gated_delta_net_fused, head baked in) served with CUDA graphs for records of
# recurring shape (token_positions padded with -1) against the same export with graphs off, side by
# side. After the ort-gpu-carry calls, one call:
#   k.sh $OUT   ONNX Runtime and wheels; the checkpoint and the export (its parity gate on CUDA);
#               pass_probe at 1 and 4 records (captured: replay against a plain run); served (RSGI):
#               clef_1q and clef_4q at c=1 and 8, 64 requests a pass after 32 warm-up requests,
#               graphs / no graphs / graphs again
R=$1; mkdir -p $R/k; t0=$(date +%s)
trap 'tar -C $R -czf $R/k.tgz k && rm -rf $R/k' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/k
bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
EX=/tmp/omni/ex-clef-flash-gdnf
mkdir -p /tmp/omni /tmp/omni-out
OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare clef-flash > $OUT/prepare.log 2>&1
grep -v -i warn $OUT/prepare.log | tail -3; cp /tmp/omni-out/export-*.log $OUT/ 2>/dev/null
cp $EX/manifest.json $OUT/manifest.json
python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["export_options"], (m.get("prefix") or {}).get("tokens"))
g = m["check"].get("parity_gate", {}); print({k: g.get(k) for k in ("passes", "max_prob_drift", "top_choice_identical", "device")})' $OUT/manifest.json
echo "prepared $(( $(date +%s) - t0 )) s"
python3 -m benchmarks.gpu.pass_probe --export $EX --workload benchmarks/workloads/clef_1q.jsonl --rows 1,4 \
  --iters 30 --warmup 5 --top 12 --out $OUT/pass.json 2>&1 | grep -v -i warn | tail -2
OMNI_CUDA_GRAPHS=0 python3 -m benchmarks.gpu.pass_probe --export $EX --workload benchmarks/workloads/clef_1q.jsonl \
  --rows 1,4 --iters 30 --warmup 5 --top 12 --out $OUT/pass-nographs.json 2>&1 | grep -v -i warn | tail -2
echo "probed $(( $(date +%s) - t0 )) s"
OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf WORKLOADS="clef_1q clef_4q" CONCURRENCY=1,8 REQUESTS=64 \
  SERVES="graphs nographs:OMNI_CUDA_GRAPHS=0 graphs2" \
  LOAD_ARGS="--warmup 32" GRANIAN_LOOP=uvloop timeout $(( 590 - $(date +%s) + t0 )) \
  bash benchmarks/gpu/qwen_h200.sh bench clef-flash 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB|rror"
grep -h -i "captured CUDA graph\|error\|Traceback" $OUT/server-*.log | sort | uniq -c | sort -rn | head -8
echo "done $(( $(date +%s) - t0 )) s"
