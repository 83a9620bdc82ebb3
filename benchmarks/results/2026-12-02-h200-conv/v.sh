#!/usr/bin/env bash
# Cua-S1 4B fp16 (gdnf, head baked) with the GatedDeltaNet conv on channels-first data (graph
# revision 3), one export, then pass_probe at 1 and 8 rows of cua_218 with every kernel listed:
# compared, kernel by kernel, with the head session's pass_probe of the same build at revision 2
# (benchmarks/results/2026-12-02-h200-head/raw/bench/pass-ex-cua-s1-gdnf.json). One call after
# the ort-gpu-carry calls: v.sh $OUT
R=$1; mkdir -p $R/v; t0=$(date +%s)
trap 'tar -C $R -czf $R/v.tgz v && rm -rf $R/v' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/v
bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
mkdir -p /tmp/omni /tmp/omni-out
OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $OUT/prepare.log 2>&1
grep -v -i warn $OUT/prepare.log | tail -2; cp /tmp/omni-out/export-*.log $OUT/ 2>/dev/null
EX=/tmp/omni/ex-cua-s1-gdnf; cp $EX/manifest.json $OUT/
python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); g = m["check"].get("parity_gate", {})
print(m["export_options"].get("graph_revision"), {k: g.get(k) for k in ("passes", "max_prob_drift", "top_choice_identical", "final_hidden_rel_err", "device")})' $OUT/manifest.json
echo "prepared $(( $(date +%s) - t0 )) s"
python3 -m benchmarks.gpu.pass_probe --export $EX --workload benchmarks/workloads/cua_218.jsonl --rows 1,8 \
  --iters 50 --warmup 5 --top 60 --out $OUT/pass.json 2>&1 | grep -v -i warn | tail -2
echo "done $(( $(date +%s) - t0 )) s"
