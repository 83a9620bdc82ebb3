#!/usr/bin/env bash
# Baselines session (2026-12-03): HF transformers eager beside our server for Open-Jev 9B, Clef-Flash
# 9B and Open-Jev-27B, all three from described checkpoints on the one-GPU machine (the baselines
# draw the weights as the exports do, since this session's qwen_h200.sh no longer skips them), and
# each bench's host facts (benchmarks/host_facts.py) beside its figures. After the ort-gpu-carry
# calls, one call per step, back to back:
#   n.sh $OUT prep     ONNX Runtime, wheels; in parallel: the described 9B, then Open-Jev 9B and
#                      Clef-Flash 9B (fp16 gdnf) from it, and Laya english (fp16 mha)
#   n.sh $OUT qwen9    Open-Jev 9B: HF eager on the noul mix, then one server, c=1, 4, 16 (96 warm-up
#                      requests); Clef-Flash: HF + Cloudflare's PyTorch head on clef_1q and clef_4q, then
#                      one server, c=1, 8, 16 (32 warm-up requests)
#   n.sh $OUT clef     the Clef-Flash part of qwen9 again, with clef-finetune (Cloudflare's reference
#                      head) carried in .whlc: the device has no copy, and .whl had none then, so qwen9's
#                      Clef-Flash baseline failed on the import and its bench stopped there
#   n.sh $OUT laya     one Laya server: laya_48 at c=1, 64, 1, 64 (two measured passes each), host facts
#   n.sh $OUT j27      the 9B's files removed; the described 27B and its fp16 gdnf export in the
#                      background; waits 45 s
#   n.sh $OUT wait27   follows the export's log until it is done (up to 540 s)
#   n.sh $OUT bench27  HF eager on the 27B noul mix, then one server: c=1, 4, 16 (96 warm-up requests)
# A second lease (another host), after the ort-gpu-carry calls:
#   n.sh $OUT fla      Cua-S1 4B (written checkpoint, fp16 gdnf), then in-process at 218 tokens: ours
#                      against HF eager as the device image has it (transformers' reference PyTorch GDN)
#                      and against HF with flash-linear-attention's Triton GDN kernels (carried in .whlf).
#                      Not measured (raw/fla-not-run/): that lease's first carry call got no machine,
#                      the seven after it started one without `mkdir -p /tmp/ortgpu`, so no part landed,
#                      ONNX Runtime's install failed and both qwen_bench runs stopped at the CUDA
#                      session. The step now stops where the install fails.
# Then, by hand in the first lease (raw/hf-ab-*.json): the 27B HF baseline with hf_model as before
# this session (the module built in float32 and cast) and as now, one after the other:
#   for v in old new; do python3 benchmarks/results/2026-12-03-h200-baselines/hf_ab.py $v --family open-jev \
#     --checkpoint /tmp/omni/ck-27b-described --export /tmp/omni/ex-open-jev-gdnf \
#     --workload benchmarks/workloads/open_jev_noul_27b.jsonl --out $OUT/r/n/hf-ab-$v.json; done
R=$1; STEP=$2; mkdir -p $R/n; t0=$(date +%s)
trap 'tar -C $R -czf $R/n-$STEP.tgz n && rm -rf $R/n' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD GRANIAN_LOOP=uvloop
case $STEP in
prep)
  bash .ortgpu/5/install.sh > $R/n/ort-install.log 2>&1; tail -1 $R/n/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni /tmp/omni-out; df -h /tmp | tail -1; free -g | head -2
  python3 -m benchmarks.host_facts --out $R/n/host-prep.json
  Q="OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 DESCRIBED=1"
  (env $Q bash benchmarks/gpu/qwen_h200.sh prepare open-jev > $R/n/prepare-jev.log 2>&1) &
  # Clef-Flash links the described checkpoint's files: wait for its config.json, written last.
  (for _ in $(seq 1 120); do [ -f /tmp/omni/ck-9b-described/config.json ] && break; sleep 2; done
   env $Q bash benchmarks/gpu/qwen_h200.sh prepare clef-flash > $R/n/prepare-clef.log 2>&1) &
  (OUT=/tmp/omni-out EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare > $R/n/prepare-laya.log 2>&1) &
  wait
  cp /tmp/omni-out/export-*.log $R/n/ 2>/dev/null
  for f in $R/n/prepare-*.log; do echo "== $f"; grep -v -i warn $f | tail -3; done
  du -sh /tmp/omni/*; df -h /tmp | tail -1
  echo "prepared $(( $(date +%s) - t0 )) s" ;;
qwen9)
  mkdir -p $R/n/jev $R/n/clef
  OUT=$R/n/jev DESCRIBED=1 INPROCESS=0 KERNELS=gdnf WORKLOADS=open_jev_noul CONCURRENCY=1,4,16 REQUESTS=48 \
    LOAD_ARGS="--warmup 96 --per-request" timeout 280 bash benchmarks/gpu/qwen_h200.sh bench open-jev 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|MiB|rror|host|jsonl"
  echo "open-jev $(( $(date +%s) - t0 )) s"
  OUT=$R/n/clef DESCRIBED=1 KERNELS=gdnf WORKLOADS="clef_1q clef_4q" CONCURRENCY=1,8,16 REQUESTS=64 \
    LOAD_ARGS="--warmup 32 --per-request" timeout $(( 580 - $(date +%s) + t0 )) bash benchmarks/gpu/qwen_h200.sh bench clef-flash 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|MiB|rror|host|jsonl"
  echo "done $(( $(date +%s) - t0 )) s" ;;
clef)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whlc/*.whl
  OUT=$R/n/clef DESCRIBED=1 KERNELS=gdnf WORKLOADS="clef_1q clef_4q" CONCURRENCY=1,8,16 REQUESTS=64 \
    LOAD_ARGS="--warmup 32 --per-request" timeout 500 bash benchmarks/gpu/qwen_h200.sh bench clef-flash 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|MiB|rror|host|jsonl" ;;
laya)
  OUT=$R/n EXPORTS="mha16=mha:float16" SERVERS="mha16:320" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 \
    LOAD_ARGS="--concurrency 1,64,1,64" timeout 240 bash benchmarks/gpu/laya_h200.sh bench 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|port|CPU|rror|host" | head -20
  echo "done $(( $(date +%s) - t0 )) s" ;;
fla)
  bash .ortgpu/5/install.sh > $R/n/ort-install.log 2>&1 || { tail -3 $R/n/ort-install.log; exit 1; }
  tail -1 $R/n/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/fla .whlf/*.whl
  python3 -m benchmarks.host_facts --out $R/n/host.json
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $R/n/prepare-cua.log 2>&1
  grep -v -i warn $R/n/prepare-cua.log | tail -2; echo "prepared $(( $(date +%s) - t0 )) s"
  B="--checkpoint /tmp/omni/ck-4b --exports gdnf=/tmp/omni/ex-cua-s1-gdnf --lengths 218 --iters 20 --warmup 5 --parity-prompts 0 --gdn-plans chunked_split"
  for v in nofla fla; do
    P=$PYTHONPATH; [ $v = fla ] && P=/tmp/fla:$PYTHONPATH
    PYTHONPATH=$P python3 -c "from transformers.utils.import_utils import is_flash_linear_attention_available as f; print('$v: fla available', f())"
    PYTHONPATH=$P python3 -m benchmarks.gpu.qwen_bench $B --out $R/n/inprocess-$v.json > $R/n/inprocess-$v.log 2>&1
    grep -i "falling back\|fla\b\|flash-linear" $R/n/inprocess-$v.log | sort | uniq -c | head -3
    grep -v -i warn $R/n/inprocess-$v.log | tail -4; echo "$v $(( $(date +%s) - t0 )) s"
  done ;;
j27)
  rm -rf /tmp/omni/ex-* /tmp/omni/ck-* /tmp/omni/clef-9b /tmp/omni/pkg-9b; df -h /tmp | tail -1; free -g | head -2
  OUT=/tmp/omni-out JEV=27b DESCRIBED=1 DETACH=1 KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare open-jev
  sleep 45; tail -5 /tmp/omni/prepare-open-jev.log; tail -3 /tmp/omni-out/export-open-jev-gdnf.log ;;
wait27)
  WAIT_S=540 TAIL=8 JEV=27b bash benchmarks/gpu/qwen_h200.sh wait open-jev
  grep -v -i warn /tmp/omni-out/export-open-jev-gdnf.log | tail -4; free -g | head -2 ;;
bench27)
  cp /tmp/omni/prepare-open-jev.log $R/n/prepare-jev27.log; cp /tmp/omni-out/export-open-jev-gdnf.log $R/n/export-open-jev-27b-gdnf.log
  cp /tmp/omni/ex-open-jev-gdnf/manifest.json $R/n/manifest-jev27.json
  OUT=$R/n JEV=27b DESCRIBED=1 INPROCESS=0 KERNELS=gdnf WORKLOADS=open_jev_noul_27b CONCURRENCY=1,4,16 REQUESTS=48 \
    LOAD_ARGS="--warmup 96 --per-request" SERVES=j27 timeout 570 bash benchmarks/gpu/qwen_h200.sh bench open-jev 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|MiB|rror|host|jsonl" ;;
esac
