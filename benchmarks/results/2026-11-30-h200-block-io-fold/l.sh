#!/usr/bin/env bash
# Call L: Laya english fp16 (mha) export; pass_probe of main (.base/prev) and this branch, alternated;
# the full kernel list of one 48-token row; four servers, main and branch alternated, laya_48.
R=$1; export OUT=/tmp/omni-out/l; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
t0=$(date +%s)
EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -5
echo "prepare $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
W=$PWD/benchmarks/workloads/laya_48.jsonl
for v in prev new prev new; do
  code=$PWD; [ $v = prev ] && code=$PWD/.base/prev
  (cd $code && PYTHONPATH=/tmp/ortsite:/tmp/site:$code timeout 100 python3 -m benchmarks.gpu.pass_probe --export /tmp/omni/ex-mha16 \
    --rows 1,8,16,64 --iters 150 --workload $W --out $OUT/pass_probe_$v-$(date +%s).json) 2>&1 | grep -v -i warn | tail -4 | sed "s/^/$v /"
done
timeout 80 python3 -m benchmarks.gpu.pass_probe --export /tmp/omni/ex-mha16 --rows 1 --iters 50 --top 80 --workload $W \
  --out $OUT/pass_probe_kernels.json 2>&1 | grep -v -i warn | tail -2
echo "probes $(( $(date +%s) - t0 )) s"
SERVERS="mha16:64::uvloop:.base/prev mha16:64::uvloop mha16:64::uvloop:.base/prev:A=2 mha16:64::uvloop::A=2" \
WORKLOADS1Q="laya_48" WORKLOADS3Q="" INPROCESS=0 timeout 300 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn | tail -30
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/l.tgz -C $OUT .
