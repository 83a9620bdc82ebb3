#!/usr/bin/env bash
# The GPU tier on the device machine (one `run` call; benchmarks/gpu/README.md): full-size random
# fp16 exports of FAMILIES, prepared side by side, then `make test-gpu` against them.
#   FAMILIES="laya cua-s1" bash benchmarks/gpu/tier.sh
# FAMILIES  laya (english), cua-s1, open-jev (9B), clef-flash; default "laya cua-s1". FAMILY:float32
#           adds that family's float32 export (alone and batched must agree to float32 rounding);
#           listed before FAMILY, its answers are the reference that FAMILY's fp16 bound is measured on.
# onnxruntime-gpu must be unpacked in /tmp/ortsite; `.whl` carried (SKIP_WHEELS=1: installed already).
# GPU_TIER_COMMIT names the commit in the record (the copied tree may carry no git history).
# Writes $OUT/tier.jsonl (one line an export: requests, 5xx, worst drift per level), tier.log, prepare-*.log.
set -uo pipefail
OUT=${OUT:-/tmp/omni-out}
FAMILIES=${FAMILIES:-laya cua-s1}
mkdir -p "$OUT" /tmp/omni
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD PYTHONUNBUFFERED=1
[ -n "${SKIP_WHEELS:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl
t0=$(date +%s)
pids=(); exports=()
for f in $FAMILIES; do
  case $f in
    laya) SKIP_WHEELS=1 bash benchmarks/gpu/laya.sh prepare > "$OUT/prepare-laya.log" 2>&1 &
          exports+=(/tmp/omni/ex-mha16) ;;
    *:float32)  # the float32 export beside the fp16 one: where padding reaching a real row would show
          SKIP_WHEELS=1 DESCRIBED=1 DTYPE=float32 EX_SUFFIX=-f32 bash benchmarks/gpu/qwen.sh prepare "${f%:*}" \
            > "$OUT/prepare-${f%:*}-f32.log" 2>&1 &
          exports+=(/tmp/omni/ex-${f%:*}-f32-gdnf) ;;
    *)    SKIP_WHEELS=1 DESCRIBED=1 bash benchmarks/gpu/qwen.sh prepare "$f" > "$OUT/prepare-$f.log" 2>&1 &
          exports+=(/tmp/omni/ex-$f-gdnf) ;;
  esac
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || echo "a prepare failed (see $OUT/prepare-*.log)"; done
echo "prepared in $(( $(date +%s) - t0 )) s: ${exports[*]}"
list=$(IFS=,; echo "${exports[*]}")
GPU_TIER_OUT="$OUT/tier.jsonl" make --no-print-directory test-gpu PYTHON=python3 GPU_TIER_EXPORTS="$list" \
  2>&1 | tee "$OUT/tier.log" | grep -v -i warn | tail -40
echo "tier done in $(( $(date +%s) - t0 )) s"
