#!/usr/bin/env bash
# Call C: Cua-S1 4B fp16 (fused GDN kernel) export, gate recorded; four servers, main's code
# (.base/prev) and this branch's alternated on the one export, cua_218 at c=1,4,16.
R=$1; export OUT=/tmp/omni-out/c; mkdir -p $OUT /tmp/omni
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
t0=$(date +%s)
[ -f /tmp/omni/ck-4b/config.json ] || python3 -m models.qwen35.random_checkpoint /tmp/omni/ck-4b --size 4b 2>&1 | tail -1
timeout 240 python3 -m models.export cua-s1 --checkpoint /tmp/omni/ck-4b --out /tmp/omni/ex-cua-s1-new --dtype float16 \
  --gdn-kernel gated_delta_net_fused --parity-gate record > $OUT/export.log 2>&1
grep -E "parity gate vs|exported" $OUT/export.log; cp /tmp/omni/ex-cua-s1-new/manifest.json $OUT/manifest.json
echo "export $(( $(date +%s) - t0 )) s"
OUT=$OUT INPROCESS=0 HF=0 KERNELS="new" SERVES="prev:K=new,CODE=.base/prev new:K=new prevb:K=new,CODE=.base/prev newb:K=new" \
  WORKLOADS=cua_218 CONCURRENCY=1,4,16 REQUESTS=200 GRANIAN_LOOP=uvloop timeout 330 bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 \
  | grep -v -i warn | grep -E "c=|ready|MiB" | tail -30
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/c.tgz -C $OUT .
