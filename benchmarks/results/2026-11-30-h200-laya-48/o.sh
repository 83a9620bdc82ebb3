#!/usr/bin/env bash
# Call O: five servers one after another; laya_48 and laya_1q at c=1,8,16,64; CPU per request at c=64 on laya_48.
R=$1; export OUT=/tmp/omni-out/o; mkdir -p $OUT
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
t0=$(date +%s)
G=OMNI_GIL_SWITCH_INTERVAL_MS
SERVERS="mha16:64::uvloop mha16:64::uvloop::$G=1 mha16:64::uvloop::$G=0.5 pre16:64::uvloop:.base/prev mha16:64::uvloop::$G=0" \
WORKLOADS1Q="laya_1q laya_48" WORKLOADS3Q="" INPROCESS=0 timeout 560 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn | tail -40
echo "bench $(( $(date +%s) - t0 )) s"
tar czf $R/o.tgz -C $OUT .
