#!/usr/bin/env bash
# Written in the graphtokens session, before it ran: Laya english as served at this tree, one
# server, `laya_48` at c=1, 8, 16, 64 (two measured passes each) and the worker's CPU over 8 s at
# c=64: do the where-we-stand figures (wake session, 2026-12-01) still hold? After the
# ort-gpu-carry calls:
#   l.sh $OUT prep    ONNX Runtime, wheels, full-size random english Laya, its fp16 `mha` export
#   l.sh $OUT bench   the server and its load (laya_h200.sh bench); SERVERS as laya_h200.sh takes them
R=$1; STEP=$2; mkdir -p $R/l; t0=$(date +%s)
trap 'tar -C $R -czf $R/l-$STEP.tgz l && rm -rf $R/l' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
if [ "$STEP" = prep ]; then
  bash .ortgpu/5/install.sh > $R/l/ort-install.log 2>&1; tail -1 $R/l/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  OUT=$R/l EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -3
  echo "prepared $(( $(date +%s) - t0 )) s"
else
  OUT=$R/l EXPORTS="mha16=mha:float16" SERVERS="${SERVERS:-mha16:320}" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 \
    timeout ${LIMIT:-400} bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn | grep -E "c=|ready|port|CPU|MiB|rror" | head -40
  echo "done $(( $(date +%s) - t0 )) s"
fi
