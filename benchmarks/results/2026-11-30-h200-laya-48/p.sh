#!/usr/bin/env bash
# Call P: full-size english Laya, main's fp16 export with the parity gate on CUDA (auto).
R=$1; export OUT=/tmp/omni-out/p; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/ortsite:$PYTHONPATH
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
t0=$(date +%s)
EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -8
python3 -c "import json; print(json.load(open('/tmp/omni/ex-mha16/manifest.json'))['check'])" | tee $OUT/gate.txt
echo "prepare $(( $(date +%s) - t0 )) s"
tar czf $R/p.tgz -C $OUT .
