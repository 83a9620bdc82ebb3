#!/usr/bin/env bash
# Call N (and after): follow the 27B prepare up to ~540 s; collect what is there.
R=$1; mkdir -p $R/n; export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
[ -f /tmp/omni/compose.done ] || { t0=$(date +%s); while [ ! -f /tmp/omni/compose.done ] && [ $(( $(date +%s) - t0 )) -lt 240 ]; do sleep 5; done; }
cp -r /tmp/omni/compose $R/n/ 2>/dev/null; cp /tmp/omni/compose.log $R/n/ 2>/dev/null
grep -v -i warn /tmp/omni/compose.log | tail -12
WAIT_S=${WAIT_S:-300} TAIL=4 bash benchmarks/gpu/qwen_h200.sh wait open-jev
cp /tmp/omni/rss.txt /tmp/omni/prepare-open-jev.log $R/n/ 2>/dev/null; cp /tmp/omni-out/export-open-jev-gdnf.log $R/n/ 2>/dev/null
echo "peak RSS (KiB):"; sort -k2 -n /tmp/omni/rss.txt | tail -1; wc -l < /tmp/omni/rss.txt
