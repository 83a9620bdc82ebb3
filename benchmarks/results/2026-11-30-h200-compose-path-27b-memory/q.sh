#!/usr/bin/env bash
# Call Q (same machine): the 27B fp16 export again, alone, its own process's RSS sampled every
# second for its first 285 s (the load, the build and the trace, into the write), then stopped.
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD PYTHONUNBUFFERED=1
rm -rf /tmp/omni/ex-open-jev-gdnf /tmp/models/cua-s1-4b-0.2 /tmp/omni/ck-4b
CUDA_VISIBLE_DEVICES=0 python3 -m models.export open-jev --checkpoint /tmp/omni/pkg-27b/checkpoint --base /tmp/omni/ck-27b \
  --out /tmp/omni/ex27 --dtype float16 --gdn-kernel gated_delta_net_fused --parity-gate record > $OUT/export27.log 2>&1 &
P=$!; t0=$(date +%s)
while kill -0 $P 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt 285 ]; do echo "$(( $(date +%s) - t0 )) $(ps -o rss= -p $P)" >> $OUT/rss27.txt; sleep 1; done
kill $P
