#!/usr/bin/env bash
# Call K2: Clef-Flash over HTTP on the export of K1: 1, 4 and 16 questions at c=1 and c=8.
R=$1; export OUT=/tmp/omni-out/k; mkdir -p $OUT
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
[ -f /tmp/omni/prepare-clef-flash.done ] || { TAIL=5 WAIT_S=200 bash benchmarks/gpu/qwen_h200.sh wait clef-flash; }
cp /tmp/omni/prepare-clef-flash.log $OUT/ 2>/dev/null; cp /tmp/omni/ex-clef-flash-gdnf/manifest.json $OUT/manifest.json
grep -v -i warn /tmp/omni-out/export-clef-flash-gdnf.log | tail -4; cp /tmp/omni-out/export-clef-flash-gdnf.log $OUT/ 2>/dev/null
t0=$(date +%s)
OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf WORKLOADS="clef_1q clef_4q clef_16q" CONCURRENCY=1,8 REQUESTS=64 LOAD_ARGS="--warmup 32" \
  GRANIAN_LOOP=uvloop timeout 480 bash benchmarks/gpu/qwen_h200.sh bench clef-flash 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB" | tail -30
echo "bench $(( $(date +%s) - t0 )) s"
tar czf $R/k.tgz -C $OUT .
