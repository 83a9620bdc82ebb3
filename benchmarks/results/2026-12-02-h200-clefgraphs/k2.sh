#!/usr/bin/env bash
# The same checkpoint build and export as k.sh, after the joint head's norms stopped exporting as
# ReduceL2 (934b6f9), on a third lease: pass_probe at 1 and 4 records (more kernels listed), then
# one server with graphs: clef_1q at c=1, 8 and 16, clef_4q at c=1 and 8.
R=$1; mkdir -p $R/k2; t0=$(date +%s)
trap 'tar -C $R -czf $R/k2.tgz k2 && rm -rf $R/k2' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/k2
bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
EX=/tmp/omni/ex-clef-flash-gdnf
mkdir -p /tmp/omni /tmp/omni-out
OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare clef-flash > $OUT/prepare.log 2>&1
grep -v -i warn $OUT/prepare.log | tail -2; cp /tmp/omni-out/export-*.log $OUT/ 2>/dev/null
cp $EX/manifest.json $OUT/manifest.json
python3 -c 'import json, sys; m = json.load(open(sys.argv[1]))
g = m["check"].get("parity_gate", {}); print({k: g.get(k) for k in ("passes", "max_prob_drift", "top_choice_identical", "device")})' $OUT/manifest.json
echo "prepared $(( $(date +%s) - t0 )) s"
python3 -m benchmarks.gpu.pass_probe --export $EX --workload benchmarks/workloads/clef_1q.jsonl --rows 1,4 \
  --iters 30 --warmup 5 --top 60 --out $OUT/pass.json 2>&1 | grep -v -i warn | tail -2
echo "probed $(( $(date +%s) - t0 )) s"
for w in "clef_1q 1,8,16" "clef_4q 1,8"; do set -- $w
  OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf WORKLOADS=$1 CONCURRENCY=$2 REQUESTS=64 SERVES="graphs-$1" \
    LOAD_ARGS="--warmup 32" GRANIAN_LOOP=uvloop timeout $(( 590 - $(date +%s) + t0 )) \
    bash benchmarks/gpu/qwen_h200.sh bench clef-flash 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB|rror"
done
grep -h -i "captured CUDA graph\|error\|Traceback" $OUT/server-*.log | sort | uniq -c | sort -rn | head -8
echo "done $(( $(date +%s) - t0 )) s"
