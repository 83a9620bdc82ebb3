#!/usr/bin/env bash
# One-GPU machine: a bfloat16 Cua-S1 4B export whose GatedDeltaNet kernels read float16 (the new
# default, `--gdn-dtype float16`) against the fp16 export and a bfloat16 one that keeps its dtype
# (`--gdn-dtype model`, ONNX Runtime's recurrent engine), all three from one full-size random
# checkpoint. After the ort-gpu-carry calls, one call per phase, back to back:
#   g.sh $OUT prep    ONNX Runtime and wheels; the checkpoint; the three exports side by side
#                     (each records its parity gate against float32 on CUDA)
#   g.sh $OUT bench   pass_probe at 1 and 8 rows of each export; then each served in turn (RSGI, as
#                     served), cua_218 at c=1, 8, 16 and 64, 200 requests a pass
#   g.sh $OUT clefprep  (a fresh machine, after the ort-gpu-carry calls) Clef-Flash 9B, fp16 and
#                     bfloat16 (float16 GDN) exports side by side from one checkpoint: the Clef-Flash
#                     exporter and gate take their own path (export_program, clef_flash/gate.py)
#   g.sh $OUT clef    both served in turn, fp16 again last: clef_1q and clef_4q at c=1, 8 and 16
# Only a few files come back from a call, so each phase returns one archive.
R=$1; phase=$2; mkdir -p $R/$phase; t0=$(date +%s)
trap 'tar -C $R -czf $R/$phase.tgz $phase && rm -rf $R/$phase' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/$phase
EXPORTS="/tmp/omni/ex-cua-s1-gdnf /tmp/omni/ex-cua-s1-bf16-gdnf /tmp/omni/ex-cua-s1-bf16m-gdnf"
case $phase in
prep)
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni /tmp/omni-out
  # The fp16 prepare writes the checkpoint; the bfloat16 exports start once it is there.
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $OUT/prepare-fp16.log 2>&1 &
  until grep -q '^random checkpoint' $OUT/prepare-fp16.log 2>/dev/null; do sleep 2; done
  OUT=/tmp/omni-out DTYPE=bfloat16 EX_SUFFIX=-bf16 KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh \
    prepare cua-s1 > $OUT/prepare-bf16.log 2>&1 &
  OUT=/tmp/omni-out DTYPE=bfloat16 EX_SUFFIX=-bf16m GDN_DTYPE=model KERNELS=gdnf SKIP_WHEELS=1 \
    bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $OUT/prepare-bf16m.log 2>&1
  wait
  for f in $OUT/prepare-*.log; do echo "== $f"; grep -v -i warn $f | tail -4; done
  cp /tmp/omni-out/export-*.log $OUT/ 2>/dev/null
  for ex in $EXPORTS; do
    cp $ex/manifest.json $OUT/manifest-$(basename $ex).json
    python3 -c 'import json, sys; m = json.load(open(sys.argv[1] + "/manifest.json"))
g = m["check"].get("parity_gate", {}); print(sys.argv[1], m["weights_dtype"], m["graph"].get("gdn_dtype"),
  {k: g.get(k) for k in ("passes", "max_prob_drift", "top_choice_identical", "final_hidden_rel_err", "gdn_plan", "device")})' $ex
  done ;;
bench)
  nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee $OUT/gpu.csv
  for ex in $EXPORTS; do
    python3 -m benchmarks.gpu.pass_probe --export $ex --workload benchmarks/workloads/cua_218.jsonl --rows 1,8 \
      --iters 40 --warmup 5 --top 12 --out $OUT/pass-$(basename $ex).json 2>&1 | grep -v -i warn | tail -3
  done
  OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf \
    SERVES="fp16 bf16:K=/tmp/omni/ex-cua-s1-bf16-gdnf bf16m:K=/tmp/omni/ex-cua-s1-bf16m-gdnf fp16b" \
    WORKLOADS=cua_218 CONCURRENCY=1,8,16,64 REQUESTS=200 GRANIAN_LOOP=uvloop \
    timeout $(( 580 - $(date +%s) + t0 )) bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|MiB|GatedDelta" ;;
clefprep)
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni /tmp/omni-out
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare clef-flash > $OUT/prepare-fp16.log 2>&1 &
  # The fp16 prepare's export starts once the Clef-Flash checkpoint is complete.
  until [ -f /tmp/omni-out/export-clef-flash-gdnf.log ]; do sleep 2; done
  python3 -m models.export clef-flash --checkpoint /tmp/omni/clef-9b --out /tmp/omni/ex-clef-flash-bf16-gdnf \
    --dtype bfloat16 --gdn-kernel gated_delta_net_fused --parity-gate record > $OUT/export-bf16.log 2>&1
  wait
  grep -v -i warn $OUT/prepare-fp16.log | tail -3; grep -v -i warn $OUT/export-bf16.log | tail -3
  cp /tmp/omni-out/export-*.log $OUT/ 2>/dev/null
  for ex in /tmp/omni/ex-clef-flash-gdnf /tmp/omni/ex-clef-flash-bf16-gdnf; do
    cp $ex/manifest.json $OUT/manifest-$(basename $ex).json
    python3 -c 'import json, sys; m = json.load(open(sys.argv[1] + "/manifest.json"))
g = m["check"].get("parity_gate", {}); print(sys.argv[1], m["weights_dtype"], m["graph"].get("gdn_dtype"),
  {k: g.get(k) for k in ("passes", "max_prob_drift", "top_choice_identical", "gdn_plan", "device")})' $ex
  done ;;
clef)
  OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf SERVES="fp16 bf16:K=/tmp/omni/ex-clef-flash-bf16-gdnf fp16b" \
    WORKLOADS="clef_1q clef_4q" CONCURRENCY=1,8,16 REQUESTS=64 LOAD_ARGS="--warmup 32" GRANIAN_LOOP=uvloop \
    timeout $(( 580 - $(date +%s) + t0 )) bash benchmarks/gpu/qwen_h200.sh bench clef-flash 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|MiB|GatedDelta"
  grep -h "GatedDeltaNet\|ready on" $OUT/server-*.log | cut -c1-200 ;;
esac
echo "$phase $(( $(date +%s) - t0 )) s"
