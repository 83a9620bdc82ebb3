#!/usr/bin/env bash
# Call A: Cua-S1 4B fp16 exported by main (streaming fold) in the background while Laya english fp16
# is prepared; Laya pass_probe (replay vs plain run per captured shape, kernels); four Laya servers,
# Granian's runtime mode mt (its ASGI default) and st alternated, laya_48.
R=$1; export OUT=/tmp/omni-out/a; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
t0=$(date +%s)
( python3 -m models.qwen35.random_checkpoint /tmp/omni/ck-4b --size 4b > $OUT/ck-4b.log 2>&1
  s=$(date +%s); /usr/bin/time -v python3 -m models.export cua-s1 --checkpoint /tmp/omni/ck-4b --out /tmp/omni/ex-cua-s1-new \
    --dtype float16 --gdn-kernel gated_delta_net_fused --parity-gate record > $OUT/export-cua.log 2>&1
  echo "cua export $(( $(date +%s) - s )) s" >> $OUT/export-cua.log ) &
CUA=$!
EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -4
echo "laya prepare $(( $(date +%s) - t0 )) s"
wait $CUA
grep -E "fold|parity gate vs|exported|cua export|Maximum resident" $OUT/export-cua.log | tail -8
python3 -c "import json; m=json.load(open('/tmp/omni/ex-cua-s1-new/manifest.json')); print('weights_folded', m.get('weights_folded'))"
ls -la /tmp/omni/ex-cua-s1-new; du -sh --apparent-size /tmp/omni/ex-cua-s1-new; du -sh /tmp/omni/ex-cua-s1-new
cp /tmp/omni/ex-cua-s1-new/manifest.json $OUT/manifest-cua.json
echo "both prepared $(( $(date +%s) - t0 )) s"
W=$PWD/benchmarks/workloads/laya_48.jsonl
timeout 120 python3 -m benchmarks.gpu.pass_probe --export /tmp/omni/ex-mha16 --rows 1,8,16,64 --iters 150 --top 12 \
  --workload $W --out $OUT/pass_probe_laya.json 2>&1 | grep -v -i warn | tail -4
echo "probe $(( $(date +%s) - t0 )) s"
SERVERS="mha16:64::uvloop mha16:64::uvloop::GRANIAN_RUNTIME_MODE=st mha16:64::uvloop::A=2 mha16:64::uvloop::GRANIAN_RUNTIME_MODE=st,A=2" \
WORKLOADS1Q="laya_48" WORKLOADS3Q="" INPROCESS=0 timeout 330 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn | tail -30
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/a.tgz -C $OUT .
