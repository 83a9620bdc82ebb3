#!/usr/bin/env bash
# FLA session (2026-12-03, afternoon): what HF transformers gives a user who installs
# flash-linear-attention, beside ours, in-process on Cua-S1 4B; and one Laya bench whose c=64 line
# now records the host's busy and stolen shares over the same seconds (benchmarks.loop_profile).
# .whlf, made here once (pure-Python wheels; Triton is the device image's own):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     -d .whlf fla-core==0.6.0 flash-linear-attention==0.6.0 einops==0.8.2
# After the ort-gpu-carry calls (each one starting `mkdir -p /tmp/ortgpu && cp .ortgpu/N/part.* /tmp/ortgpu/`),
# one call per step, back to back, carrying .ortgpu/5, .whl and .whlf:
#   f.sh $OUT fla    ONNX Runtime, wheels, FLA's wheels (fla-core, flash-linear-attention, einops
#                    0.8.2, in .whlf) into their own folder; Cua-S1 4B (written random checkpoint,
#                    fp16 gdnf export); then benchmarks.gpu.qwen_bench at 218, 1,000 and 3,399 tokens,
#                    one row: ours (plain and CUDA graphs) against HF eager bf16, first as the device
#                    image has it (transformers' reference PyTorch GatedDeltaNet), then with FLA on
#                    the path (its Triton chunked GatedDeltaNet). causal-conv1d is in neither.
#   f.sh $OUT laya   Laya english fp16 (mha), one server: laya_48 at c=1, 64, 1, 64, host facts
# Then, by hand in the same lease (raw/laya-again/): the same server twice more, c=1 and 64, host
# facts before and after each. A second lease, after the ort-gpu-carry calls (same carry):
#   f.sh $OUT gdn    benchmarks.gpu.gdn_kernel_probe: one GDN layer, ONNX Runtime's kernel against FLA's
# A third lease, after the ort-gpu-carry calls (same carry):
#   f.sh $OUT jevprep   Open-Jev 9B from a described checkpoint, fp16 gdnf (its prepare and finish
#                       serve the baseline)
#   f.sh $OUT jevhf     HF eager bf16 on the 9B noul mix, without FLA, then with it
# then by hand, the FLA run again in a new process (Triton's kernels compiled and on disk by then):
#   PYTHONPATH=/tmp/fla:/tmp/ortsite:/tmp/site:$PWD python3 -m benchmarks.gpu.hf_baseline --family open-jev \
#     --checkpoint /tmp/omni/ck-9b-described --export /tmp/omni/ex-open-jev-gdnf \
#     --workload benchmarks/workloads/open_jev_noul.jsonl --out $OUT/f/hf-jev-fla-again.json
# Our server on that host was next; the device time left (237 s) was too little to start a machine.
R=$1; STEP=$2; mkdir -p $R/f; t0=$(date +%s)
trap 'tar -C $R -czf $R/f-$STEP.tgz f && rm -rf $R/f' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD GRANIAN_LOOP=uvloop
case $STEP in
fla)
  bash .ortgpu/5/install.sh > $R/f/ort-install.log 2>&1 || { tail -3 $R/f/ort-install.log; exit 1; }
  tail -1 $R/f/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/fla .whlf/*.whl
  python3 -m benchmarks.host_facts --out $R/f/host-fla.json
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $R/f/prepare-cua.log 2>&1
  grep -v -i warn $R/f/prepare-cua.log | tail -2; echo "prepared $(( $(date +%s) - t0 )) s"
  B="--checkpoint /tmp/omni/ck-4b --exports gdnf=/tmp/omni/ex-cua-s1-gdnf --lengths 218,1000,3399 --iters 20 --warmup 5 --parity-prompts 0 --gdn-plans chunked_split"
  for v in nofla fla; do
    P=$PYTHONPATH; [ $v = fla ] && P=/tmp/fla:$PYTHONPATH
    PYTHONPATH=$P python3 -c "from transformers.utils.import_utils import is_flash_linear_attention_available as f, is_causal_conv1d_available as c; print('$v: fla', f(), 'causal_conv1d', c())"
    PYTHONPATH=$P timeout 200 python3 -m benchmarks.gpu.qwen_bench $B --out $R/f/inprocess-$v.json > $R/f/inprocess-$v.log 2>&1
    grep -i "fall\|fast path\|flash-linear\|causal" $R/f/inprocess-$v.log | sort | uniq -c | head -4
    grep -v -i warn $R/f/inprocess-$v.log | grep -E "^[0-9]|rror|skipping" | cut -c1-400; echo "$v $(( $(date +%s) - t0 )) s"
  done ;;
laya)
  OUT=/tmp/omni-out EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare > $R/f/prepare-laya.log 2>&1
  grep -v -i warn $R/f/prepare-laya.log | tail -3; echo "prepared $(( $(date +%s) - t0 )) s"
  OUT=$R/f EXPORTS="mha16=mha:float16" SERVERS="mha16:320" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 \
    LOAD_ARGS="--concurrency 1,64,1,64" timeout 300 bash benchmarks/gpu/laya_h200.sh bench 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|port|CPU|rror|host|steal" | head -24
  python3 -c "import json; c=json.load(open('$R/f/cpu_mha16-320.json')); print('host over the c=64 window', c['cpu'].get('host'))" 2>&1 | tail -1
  echo "done $(( $(date +%s) - t0 )) s" ;;
gdn)
  # One GDN layer's recurrence, ONNX Runtime's GatedDeltaNet (both engines) against FLA's Triton
  # kernel on the same inputs: Cua-S1 4B's head counts, then Open-Jev-27B's (48 value heads).
  bash .ortgpu/5/install.sh > $R/f/ort-install.log 2>&1 || { tail -3 $R/f/ort-install.log; exit 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/fla .whlf/*.whl
  export PYTHONPATH=/tmp/fla:$PYTHONPATH
  timeout 280 python3 -m benchmarks.gpu.gdn_kernel_probe --model 4b --shapes 1x144,8x144,16x218,1x1088,1x3456 \
    --out $R/f/gdn-4b.json 2>&1 | grep -v -i warn
  echo "4b $(( $(date +%s) - t0 )) s"
  timeout 200 python3 -m benchmarks.gpu.gdn_kernel_probe --model 27b --shapes 1x80,1x1088,1x3456 --fla-dtypes float16 \
    --out $R/f/gdn-27b.json 2>&1 | grep -v -i warn
  echo "27b $(( $(date +%s) - t0 )) s" ;;
jevprep)
  # Open-Jev 9B (described, fp16 gdnf): only its prepare and finish serve the HF baseline below.
  bash .ortgpu/5/install.sh > $R/f/ort-install.log 2>&1 || { tail -3 $R/f/ort-install.log; exit 1; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/fla .whlf/*.whl
  python3 -m benchmarks.host_facts --out $R/f/host-jev.json
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 DESCRIBED=1 timeout 500 bash benchmarks/gpu/qwen_h200.sh prepare open-jev \
    > $R/f/prepare-jev.log 2>&1; grep -v -i warn $R/f/prepare-jev.log | tail -3; echo "prepared $(( $(date +%s) - t0 )) s" ;;
jevhf)
  # HF eager bf16 on the 9B noul mix, in-process, one request at a time: without FLA, then with it.
  for v in nofla fla; do
    P=$PYTHONPATH; [ $v = fla ] && P=/tmp/fla:$PYTHONPATH
    PYTHONPATH=$P timeout 250 python3 -m benchmarks.gpu.hf_baseline --family open-jev --checkpoint /tmp/omni/ck-9b-described \
      --export /tmp/omni/ex-open-jev-gdnf --workload benchmarks/workloads/open_jev_noul.jsonl --out $R/f/hf-jev-$v.json \
      > $R/f/hf-jev-$v.log 2>&1
    grep -i "falling back" $R/f/hf-jev-$v.log | cut -c1-90 | sort | uniq -c; grep -v -i warn $R/f/hf-jev-$v.log | tail -2
    echo "$v $(( $(date +%s) - t0 )) s"
  done ;;
esac
