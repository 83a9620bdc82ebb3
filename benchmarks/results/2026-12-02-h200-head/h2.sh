#!/usr/bin/env bash
# A third lease, one call after the ort-gpu-carry calls: Cua-S1 4B fp16 (gated_delta_net_fused)
# with the system turn baked in (the default export) served (RSGI) at c=1, 8, 16 and 64 on
# cua_218, 200 requests a pass after a warm-up pass.
#   h2.sh $OUT all
R=$1; phase=$2; mkdir -p $R/$phase; t0=$(date +%s)
trap 'tar -C $R -czf $R/$phase.tgz $phase && rm -rf $R/$phase' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/$phase
bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
mkdir -p /tmp/omni /tmp/omni-out
OUT=/tmp/omni-out KERNELS=gdnf bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $OUT/prepare.log 2>&1
grep -v -i warn $OUT/prepare.log | tail -2; cp /tmp/omni-out/export-*.log $OUT/ 2>/dev/null
OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf WORKLOADS=cua_218 CONCURRENCY=1,8,16,64 REQUESTS=200 GRANIAN_LOOP=uvloop \
  timeout $(( 585 - $(date +%s) + t0 )) bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 \
  | grep -v -i warn | grep -E "c=|ready|MiB"
echo "$phase $(( $(date +%s) - t0 )) s"
