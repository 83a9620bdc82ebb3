#!/usr/bin/env bash
# Run in the graphtokens session (results in raw/, README.md, docs/benchmarks.md); written before
# it ran, against a change since reverted (README.md): does finishing a request on the executor
# thread when nothing waits (Settings.finish_when_idle, OMNI_FINISH_WHEN_IDLE) take Cua-S1's cold
# `finish` off c=1? After the ort-gpu-carry calls:
#   i.sh $OUT prep    checkpoint, fp16 gdnf export (~160 s)
#   i.sh $OUT bench   cua_218 at c=1, 8, 16: on, off, on, off (one server each, in turn)
# Expect Server-Timing `finish` at c=1 down from ~0.2 ms to ~0.05 with it on, p50 ~0.1-0.15 ms
# lower, and c=8-16 unchanged (passes end with requests waiting there, so the loop finishes).
R=$1; STEP=$2; mkdir -p $R/f; t0=$(date +%s)
trap 'tar -C $R -czf $R/f-$STEP.tgz f && rm -rf $R/f' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/f
if [ "$STEP" = prep ]; then
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni /tmp/omni-out
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $OUT/prepare.log 2>&1
  grep -v -i warn $OUT/prepare.log | tail -2; echo "prepared $(( $(date +%s) - t0 )) s"
else
  OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf WORKLOADS=cua_218 CONCURRENCY=1,8,16 REQUESTS=200 \
    SERVES="on off:OMNI_FINISH_WHEN_IDLE=0 on2 off2:OMNI_FINISH_WHEN_IDLE=0" \
    timeout ${LIMIT:-500} bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB|rror"
  for f in $OUT/http_cua_218-*.json; do
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
for lv in d["levels"]:
    for p in lv["passes"]: print(sys.argv[1].split("-")[-1], lv["concurrency"], round(p["p50_ms"], 2), p["server_timing_p50_ms"])' $f
  done
  echo "done $(( $(date +%s) - t0 )) s"
fi
