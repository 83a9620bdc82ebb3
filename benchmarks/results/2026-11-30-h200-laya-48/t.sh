#!/usr/bin/env bash
# Call T: main's fp16 export (residual in the norm kernel); servers main (.base/prev) and the Waiting branch (working tree), alternated, laya_48.
R=$1; export OUT=/tmp/omni-out/t; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/ortsite:$PYTHONPATH
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
t0=$(date +%s)
EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | grep exported
echo "prepare $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
SERVERS="mha16:64::uvloop:.base/prev mha16:64::uvloop mha16:64::uvloop:.base/prev:A=2 mha16:64::uvloop::A=2" \
WORKLOADS1Q="laya_48" WORKLOADS3Q="" INPROCESS=0 timeout 420 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn | tail -30
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/t.tgz -C $OUT .
