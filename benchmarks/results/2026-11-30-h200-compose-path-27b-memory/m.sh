#!/usr/bin/env bash
# Call M (two-GPU machine): start both jobs detached, then follow them for up to ~540 s.
#  - GPU 0, cores 0-15: Open-Jev-27B-v1.1 random checkpoint and fp16 export (gate recorded),
#    its build's RSS sampled every 2 s (rss.sh): the export's host memory since build_module(consume=True).
#  - GPU 1, cores 16-31: compose_path.sh.
R=$1; mkdir -p $R/m /tmp/omni
t0=$(date +%s)
bash .ortgpu/5/install.sh > $R/m/ort-install.log 2>&1; tail -1 $R/m/ort-install.log
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
nproc; free -g | head -2; df -h /tmp | tail -1; git log --oneline -1 2>/dev/null || true
CUDA_VISIBLE_DEVICES=0 JEV=27b KERNELS=gdnf SKIP_WHEELS=1 DETACH=1 taskset -c 0-15 bash benchmarks/gpu/qwen_h200.sh prepare open-jev
(setsid nohup bash .base/rss.sh > /dev/null 2>&1 &)
(setsid nohup bash .base/compose_path.sh > /tmp/omni/compose.log 2>&1 &)
while [ ! -f /tmp/omni/compose.done ] && [ $(( $(date +%s) - t0 )) -lt 560 ]; do sleep 5; done
cp -r /tmp/omni/compose $R/m/ 2>/dev/null; cp /tmp/omni/compose.log $R/m/ 2>/dev/null
grep -v -i warn /tmp/omni/compose.log | tail -20
tail -3 /tmp/omni/prepare-open-jev.log; tail -1 /tmp/omni/rss.txt; sort -k2 -n /tmp/omni/rss.txt | tail -1
