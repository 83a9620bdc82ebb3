#!/usr/bin/env bash
# Call N: full-size english Laya; exports of main (mha16) and of 9a4a84e (pre16, before the skip-kernel LayerNorm); CUDA drift.
R=$1; export OUT=/tmp/omni-out/n; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/ortsite:$PYTHONPATH
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
t0=$(date +%s)
EXPORTS="pre16=mha:float16:.base/prev mha16=mha:float16" DRIFT=1 SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -14
echo "prepare $(( $(date +%s) - t0 )) s"
tar czf $R/n.tgz -C $OUT .
