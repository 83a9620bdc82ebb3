#!/usr/bin/env bash
# Call D: Cua-S1 4B fp16; pass_probe at 218 tokens, 1-16 rows, with each GatedDeltaNet engine
# (the served chunked_split, and ONNX Runtime's own choice); then Clef-Flash 9B prepared detached.
R=$1; export OUT=/tmp/omni-out/d; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
t0=$(date +%s)
python3 -m models.qwen35.random_checkpoint /tmp/omni/ck-4b --size 4b > $OUT/ck-4b.log 2>&1
python3 -m models.export cua-s1 --checkpoint /tmp/omni/ck-4b --out /tmp/omni/ex-cua-s1-new \
    --dtype float16 --gdn-kernel gated_delta_net_fused --parity-gate record > $OUT/export-cua.log 2>&1
grep -E "exported" $OUT/export-cua.log | tail -1
echo "prepared $(( $(date +%s) - t0 )) s"
for plan in chunked_split auto; do
  OMNI_CUDA_GDN_PLAN=$plan timeout 120 python3 -m benchmarks.gpu.pass_probe --export /tmp/omni/ex-cua-s1-new --rows 1,2,4,8,16 \
    --iters 20 --warmup 3 --top 4 --workload benchmarks/workloads/cua_218.jsonl --out $OUT/pass_probe_$plan.json 2>&1 \
    | grep -v -i warn | tail -5 | sed "s/^/$plan /"
done
echo "probes $(( $(date +%s) - t0 )) s"
rm -rf /tmp/omni/ck-4b /tmp/omni/ex-cua-s1-new
KERNELS=gdnf SKIP_WHEELS=1 DETACH=1 bash benchmarks/gpu/qwen_h200.sh prepare clef-flash
tar czf $R/d.tgz -C $OUT .
WAIT_S=$(( 560 - $(date +%s) + t0 )) TAIL=4 bash benchmarks/gpu/qwen_h200.sh wait clef-flash
