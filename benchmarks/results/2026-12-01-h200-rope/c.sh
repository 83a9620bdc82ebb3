#!/usr/bin/env bash
# A third lease: Clef-Flash 9B fp16 (gated_delta_net_fused) with graph revision 2, its own export
# path (export_program, clef_flash/gate.py): does its parity gate on CUDA still pass (it passed at
# drift 0.011, 21/21, with revision 1 in the gdn16 session)? Then served (RSGI): clef_1q at c=1
# and 8, 64 requests a pass after 32 warm-up requests. No side-by-side export: the disk holds one.
#   c.sh $OUT clef    (after the ort-gpu-carry calls; carry .ortgpu/5 and .whl)
R=$1; phase=$2; mkdir -p $R/$phase; t0=$(date +%s)
trap 'tar -C $R -czf $R/$phase.tgz $phase && rm -rf $R/$phase' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/$phase
bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
mkdir -p /tmp/omni /tmp/omni-out
OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare clef-flash > $OUT/prepare.log 2>&1
grep -v -i warn $OUT/prepare.log | tail -4; cp /tmp/omni-out/export-*.log $OUT/ 2>/dev/null
cp /tmp/omni/ex-clef-flash-gdnf/manifest.json $OUT/manifest-ex-clef-flash-gdnf.json
python3 -c 'import json; m = json.load(open("/tmp/omni/ex-clef-flash-gdnf/manifest.json")); print(m["export_options"]); print(m["check"].get("parity_gate"))'
OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf WORKLOADS=clef_1q CONCURRENCY=1,8 REQUESTS=64 LOAD_ARGS="--warmup 32" \
  GRANIAN_LOOP=uvloop timeout $(( 585 - $(date +%s) + t0 )) bash benchmarks/gpu/qwen_h200.sh bench clef-flash 2>&1 \
  | grep -v -i warn | grep -E "c=|ready|MiB"
echo "$phase $(( $(date +%s) - t0 )) s"
