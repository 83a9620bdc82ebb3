#!/usr/bin/env bash
# Clef-Flash 9B fp16 (gated_delta_net_fused) from one full-size random checkpoint, with its system
# turn and STATE: line baked into the graph and without (--prompt-head in-rows), one after the
# other: the disk holds one 9B export beside the checkpoint. After the ort-gpu-carry calls, one
# call per phase, back to back:
#   c.sh $OUT baked   ONNX Runtime and wheels; the checkpoint and the baked export (its parity gate on
#                     CUDA); clef_1q's logits saved; pass_probe at one record; served (RSGI): clef_1q
#                     at c=1 and 8, 64 requests a pass after 32 warm-up requests
#   c.sh $OUT rows    the baked export removed, the in-rows one written; the same, its logits
#                     compared with the baked export's
R=$1; phase=$2; mkdir -p $R/$phase; t0=$(date +%s)
trap 'tar -C $R -czf $R/$phase.tgz $phase && rm -rf $R/$phase' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/$phase
HERE=benchmarks/results/2026-12-02-h200-head
if [ $phase = baked ]; then
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  EX=/tmp/omni/ex-clef-flash-gdnf; SUFFIX=; HEAD=
else
  rm -rf /tmp/omni/ex-clef-flash-gdnf /tmp/omni/ex-cua-s1-*
  EX=/tmp/omni/ex-clef-flash-rows-gdnf; SUFFIX=-rows; HEAD=in-rows
fi
mkdir -p /tmp/omni /tmp/omni-out-$phase
OUT=/tmp/omni-out-$phase EX_SUFFIX=$SUFFIX PROMPT_HEAD=$HEAD KERNELS=gdnf SKIP_WHEELS=1 \
  bash benchmarks/gpu/qwen_h200.sh prepare clef-flash > $OUT/prepare.log 2>&1
grep -v -i warn $OUT/prepare.log | tail -3; cp /tmp/omni-out-$phase/export-*.log $OUT/ 2>/dev/null
cp $EX/manifest.json $OUT/manifest.json
python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["export_options"], (m.get("prefix") or {}).get("tokens"))
g = m["check"].get("parity_gate", {}); print({k: g.get(k) for k in ("passes", "max_prob_drift", "top_choice_identical", "device")})' $OUT/manifest.json
python3 $HERE/clef_logits.py $EX benchmarks/workloads/clef_1q.jsonl /tmp/omni/clef-$phase.npz \
  $( [ $phase = rows ] && echo /tmp/omni/clef-baked.npz ) 2>&1 | grep -v -i warn
python3 -m benchmarks.gpu.pass_probe --export $EX --workload benchmarks/workloads/clef_1q.jsonl --rows 1 \
  --iters 30 --warmup 5 --top 30 --out $OUT/pass.json 2>&1 | grep -v -i warn | tail -1
OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf EX_SUFFIX=$SUFFIX WORKLOADS=clef_1q CONCURRENCY=1,8 REQUESTS=64 \
  LOAD_ARGS="--warmup 32" GRANIAN_LOOP=uvloop timeout $(( 585 - $(date +%s) + t0 )) \
  bash benchmarks/gpu/qwen_h200.sh bench clef-flash 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB"
echo "$phase $(( $(date +%s) - t0 )) s"
