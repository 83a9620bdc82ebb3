#!/usr/bin/env bash
# Call E: Clef-Flash 9B fp16 exported by main (weights folded at export): start-to-ready twice,
# then one question at c=1 over HTTP.
R=$1; export OUT=/tmp/omni-out/e; mkdir -p $OUT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
[ -f /tmp/omni/prepare-clef-flash.done ] || { TAIL=5 WAIT_S=300 bash benchmarks/gpu/qwen_h200.sh wait clef-flash; }
cp /tmp/omni/prepare-clef-flash.log $OUT/ 2>/dev/null; cp /tmp/omni/ex-clef-flash-gdnf/manifest.json $OUT/manifest.json
grep -v -i warn /tmp/omni-out/export-clef-flash-gdnf.log | grep -E "fold|gate|exported" | tail -4
cp /tmp/omni-out/export-clef-flash-gdnf.log $OUT/ 2>/dev/null
ls -la /tmp/omni/ex-clef-flash-gdnf; du -sh /tmp/omni/ex-clef-flash-gdnf
t0=$(date +%s)
OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf SERVES="one two" WORKLOADS="clef_1q" CONCURRENCY=1 REQUESTS=64 LOAD_ARGS="--warmup 32" \
  GRANIAN_LOOP=uvloop timeout 400 bash benchmarks/gpu/qwen_h200.sh bench clef-flash 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB" | tail -12
for f in $OUT/readyz-*.json; do python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['models'][0]; print(sys.argv[1], 'load %.0f ms, warm-up %.0f ms' % (m['load_ms'], m['warmup_ms']))" $f; done
echo "bench $(( $(date +%s) - t0 )) s"
tar czf $R/e.tgz -C $OUT .
