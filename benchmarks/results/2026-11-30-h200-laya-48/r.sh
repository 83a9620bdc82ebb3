#!/usr/bin/env bash
# Call R: main's fp16 export; pass_probe at 48-token rows (laya_48) and at laya_1q's rows, 1..64 rows.
R=$1; export OUT=/tmp/omni-out/r; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/ortsite:$PYTHONPATH
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
t0=$(date +%s)
[ -f /tmp/omni/ex-mha16/manifest.json ] || EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | grep exported
echo "prepare $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
timeout 200 python3 -m benchmarks.gpu.pass_probe --export /tmp/omni/ex-mha16 --rows 1,8,16,24,32,64 --workload benchmarks/workloads/laya_48.jsonl --out $OUT/pass_probe_48.json 2>&1 | grep -v -i warn | tail -12
timeout 200 python3 -m benchmarks.gpu.pass_probe --export /tmp/omni/ex-mha16 --rows 1,8,16,24,32,64 --out $OUT/pass_probe_1q.json 2>&1 | grep -v -i warn | tail -12
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/r.tgz -C $OUT .
