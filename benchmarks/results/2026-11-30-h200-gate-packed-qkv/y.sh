#!/usr/bin/env bash
# Call Y: Cua-S1 over HTTP, the exports of call X alternated (prev, new, prev, new), cua_218 at c=1,4,16.
R=$1; export OUT=/tmp/omni-out/y; mkdir -p $OUT
t0=$(date +%s)
ls /tmp/omni/ex-cua-s1-prev/manifest.json /tmp/omni/ex-cua-s1-new/manifest.json || exit 1
OUT=$OUT INPROCESS=0 HF=0 KERNELS="prev new" SERVES="prev:K=prev new:K=new prevb:K=prev newb:K=new" WORKLOADS=cua_218 \
  CONCURRENCY=1,4,16 REQUESTS=200 GRANIAN_LOOP=uvloop timeout 540 bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB" | tail -30
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/y.tgz -C $OUT .
