#!/usr/bin/env bash
# Call Q: laya_48, five servers one after another: GIL switch interval 0 (Python's 5 ms) / 0.5 ms alternated, then OMNI_CUDA_GRAPH_ROWS=32.
R=$1; export OUT=/tmp/omni-out/q; mkdir -p $OUT
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
t0=$(date +%s)
G=OMNI_GIL_SWITCH_INTERVAL_MS
SERVERS="mha16:64::uvloop::$G=0 mha16:64::uvloop::$G=0.5 mha16:64::uvloop::$G=0,A=2 mha16:64::uvloop::$G=0.5,A=2 mha16:64::uvloop::OMNI_CUDA_GRAPH_ROWS=32" \
WORKLOADS1Q="laya_48" WORKLOADS3Q="" INPROCESS=0 timeout 560 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn | tail -30
echo "bench $(( $(date +%s) - t0 )) s"
tar czf $R/q.tgz -C $OUT .
