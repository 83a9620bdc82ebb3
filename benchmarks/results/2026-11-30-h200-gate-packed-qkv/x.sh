#!/usr/bin/env bash
# Call X: Cua-S1 4B fp16 (fused GDN kernel) exported by main (prev, .base/prev) and by the
# residual-in-SkipSimplifiedLayerNorm branch (new), gates on CUDA (recorded); in-process p50 and CUPTI of both.
R=$1; export OUT=/tmp/omni-out/x; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
t0=$(date +%s)
[ -f /tmp/omni/ck-4b/config.json ] || PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD python3 -m models.qwen35.random_checkpoint /tmp/omni/ck-4b --size 4b 2>&1 | tail -1
for e in prev new; do
  code=$PWD; [ $e = prev ] && code=$PWD/.base/prev
  (cd $code && PYTHONPATH=/tmp/ortsite:/tmp/site:$code python3 -m models.export cua-s1 --checkpoint /tmp/omni/ck-4b \
    --out /tmp/omni/ex-cua-s1-$e --dtype float16 --gdn-kernel gated_delta_net_fused --parity-gate record) > $OUT/export-$e.log 2>&1 &
done
wait
for e in prev new; do grep -E "parity gate vs|exported" $OUT/export-$e.log | sed "s/^/$e: /"; cp /tmp/omni/ex-cua-s1-$e/manifest.json $OUT/manifest-$e.json; done
echo "exports $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
timeout 300 python3 -m benchmarks.gpu.qwen_bench --checkpoint /tmp/omni/ck-4b --exports prev=/tmp/omni/ex-cua-s1-prev,new=/tmp/omni/ex-cua-s1-new \
  --lengths 218 --batch 1,4,16 --iters 20 --warmup 3 --parity-prompts 0 --no-hf --gdn-plans chunked_split \
  --profile new --profile-plan chunked_split --out $OUT/inprocess.json 2>&1 | grep -v -i warn | tail -14
timeout 120 python3 - <<'PY' 2>&1 | grep -v -i warn | tail -3
import json
from app.runtime import sessions
from benchmarks.gpu.qwen_bench import profile
with sessions.gdn_engine("chunked_split"):
    result = profile("/tmp/omni/ex-cua-s1-prev/model.onnx")
json.dump(result, open("/tmp/omni-out/x/profile-prev.json", "w"))
print("profile prev", json.dumps(result)[:1500])
PY
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/x.tgz -C $OUT .
