#!/usr/bin/env bash
# Call V: a full-size random Cua-S1 4B, fp16 export with the fused GDN kernel and the parity gate
# on CUDA (recorded, not enforced), then benchmarks.gpu.drift on the same export for comparison.
R=$1; export OUT=/tmp/omni-out/v; mkdir -p $OUT /tmp/omni
[ -d /tmp/ortsite/onnxruntime ] || bash .ortgpu/5/install.sh >/dev/null 2>&1
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD PYTHONUNBUFFERED=1
t0=$(date +%s)
[ -f /tmp/omni/ck-4b/config.json ] || python3 -m models.qwen35.random_checkpoint /tmp/omni/ck-4b --size 4b 2>&1 | grep -v -i warn | tail -2
echo "checkpoint $(( $(date +%s) - t0 )) s"
python3 -m models.export cua-s1 --checkpoint /tmp/omni/ck-4b --out /tmp/omni/ex-cua-gdnf --dtype float16 \
  --gdn-kernel gated_delta_net_fused --parity-gate record > $OUT/export-cua.log 2>&1
echo "export rc $? at $(( $(date +%s) - t0 )) s"; grep -v -i warn $OUT/export-cua.log | tail -8
cp /tmp/omni/ex-cua-gdnf/manifest.json $OUT/manifest-cua.json
python3 -c "import json; print(json.dumps(json.load(open('$OUT/manifest-cua.json'))['check']))"
ORT_GDN_PLAN=chunked_split timeout 240 python3 -m benchmarks.gpu.drift --checkpoint /tmp/omni/ck-4b --exports gdnf=/tmp/omni/ex-cua-gdnf \
  --skip tf32,bf16,perturbed --out $OUT/drift-cua.json 2>&1 | grep -v -i warn | tail -4
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/v.tgz -C $OUT .
