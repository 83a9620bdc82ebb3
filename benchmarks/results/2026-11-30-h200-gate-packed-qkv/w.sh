#!/usr/bin/env bash
# Call W: servers on main's fp16 export (prev16) and the packed-QKV export (pk16), alternated, laya_48 (exports of call U).
R=$1; export OUT=/tmp/omni-out/w; mkdir -p $OUT
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
t0=$(date +%s)
ls /tmp/omni/ex-prev16/manifest.json /tmp/omni/ex-pk16/manifest.json || exit 1
SERVERS="prev16:64::uvloop pk16:64::uvloop prev16:64::uvloop::A=2 pk16:64::uvloop::A=2" \
WORKLOADS1Q="laya_48" WORKLOADS3Q="" INPROCESS=0 timeout 500 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn | tail -40
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/w.tgz -C $OUT .
