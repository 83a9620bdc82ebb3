#!/usr/bin/env bash
# Call H: wait for the 27B build of call G.
R=$1; export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
WAIT_S=${WAIT_S:-580} TAIL=6 bash benchmarks/gpu/qwen_h200.sh wait open-jev
sort -k2 -n /tmp/omni/rss.txt | tail -1; ls -la /tmp/omni; df -h /tmp | tail -1
