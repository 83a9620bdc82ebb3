#!/usr/bin/env bash
# Call U: exports of main (prev16) and of the packed-QKV branch (pk16), gates on CUDA, CUDA drift;
# then pass_probe at 48-token rows and laya_1q rows, alternated.
R=$1; export OUT=/tmp/omni-out/u; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/ortsite:$PYTHONPATH
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
t0=$(date +%s)
EXPORTS="prev16=mha:float16:.base/prev pk16=mha:float16" DRIFT=1 SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -8
echo "prepare $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
W=benchmarks/workloads/laya_48.jsonl
for e in prev16 pk16 prev16 pk16; do
  timeout 100 python3 -m benchmarks.gpu.pass_probe --export /tmp/omni/ex-$e --rows 1,8,16,64 --iters 150 --workload $W --out $OUT/pass_probe_48_$e-$(date +%s).json 2>&1 | grep -v -i warn | tail -4 | sed "s/^/$e /"
done
for e in prev16 pk16; do
  timeout 100 python3 -m benchmarks.gpu.pass_probe --export /tmp/omni/ex-$e --rows 1,16,64 --iters 150 --out $OUT/pass_probe_1q_$e.json 2>&1 | grep -v -i warn | tail -3 | sed "s/^/$e 1q /"
done
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/u.tgz -C $OUT .
