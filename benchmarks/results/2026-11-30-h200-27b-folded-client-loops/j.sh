#!/usr/bin/env bash
# Call J (one-GPU machine): Cua-S1 4B fp16 exported by main with the consuming load (build_module
# consume=True), under /usr/bin/time -v for its peak RSS (the previous load: 25.4 GB, 2026-11-30
# evening call A); the export's CUDA gate (the same weights give the same drift); then one server:
# start-to-ready and cua_218 at c=1.
R=$1; export OUT=/tmp/omni-out/j; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
t0=$(date +%s)
python3 -m models.qwen35.random_checkpoint /tmp/omni/ck-4b --size 4b > $OUT/ck-4b.log 2>&1
echo "checkpoint $(( $(date +%s) - t0 )) s"
/usr/bin/time -v python3 -m models.export cua-s1 --checkpoint /tmp/omni/ck-4b --out /tmp/omni/ex-cua-s1-new \
    --dtype float16 --gdn-kernel gated_delta_net_fused --parity-gate record > $OUT/export-cua.log 2>&1
grep -v -i warn $OUT/export-cua.log | grep -E "Maximum resident|Elapsed \(wall|gate|exported|fold" | tail -6
cp /tmp/omni/ex-cua-s1-new/manifest.json $OUT/manifest-cua.json
OUT=$OUT INPROCESS=0 HF=0 KERNELS="new" WORKLOADS=cua_218 CONCURRENCY=1 REQUESTS=200 GRANIAN_LOOP=uvloop \
  timeout 200 bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB" | tail -6
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/j.tgz -C $OUT .
