#!/usr/bin/env bash
# Call F: Laya english fp16; pass_probe of the code before the unpack change (.base/prev = git archive
# ba91d53) and after, alternated twice; then two servers, before and after, laya_48.
R=$1; export OUT=/tmp/omni-out/f; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
t0=$(date +%s)
EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -1
echo "prepare $(( $(date +%s) - t0 )) s"
W=$PWD/benchmarks/workloads/laya_48.jsonl
for v in prev new prev new; do
  code=$PWD; [ $v = prev ] && code=$PWD/.base/prev
  (cd $code && PYTHONPATH=/tmp/ortsite:/tmp/site:$code timeout 60 python3 -m benchmarks.gpu.pass_probe --export /tmp/omni/ex-mha16 \
    --rows 1,8,16,64 --iters 150 --no-kernels --workload $W --out $OUT/pass_probe_$v-$(date +%s).json) 2>&1 | grep -v -i warn | tail -4 | sed "s/^/$v /"
done
echo "probes $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
SERVERS="mha16:64::uvloop:.base/prev mha16:64::uvloop" WORKLOADS1Q="laya_48" WORKLOADS3Q="" INPROCESS=0 timeout 150 \
  bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn | grep -E "c=1 |c=64|CPU per" | tail -10
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/f.tgz -C $OUT .
