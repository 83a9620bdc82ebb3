#!/usr/bin/env bash
# One-GPU machine: Cua-S1 4B fp16 (gated_delta_net_fused) exported by main before this session's
# change ("old", the code of 68fb782 as a `git archive` in .ab/old) and by this tree ("new": RoPE
# as one RotaryEmbedding kernel each for q and k, and GroupQueryAttention's row lengths counted
# once a pass instead of once a layer), both from one full-size random checkpoint; and "ns", the
# new export edited so that its GatedDeltaNet nodes get no initial state (variant.py). After the
# ort-gpu-carry calls, one call per phase, back to back:
#   r.sh $OUT prep    ONNX Runtime and wheels; the checkpoint; old and new exported side by side
#                     (each records its parity gate against float32 on CUDA); ns; compare.py
#   r.sh $OUT bench   pass_probe at 1 and 8 rows of each; then each served in turn (RSGI, as
#                     served), old and new twice: cua_218 at c=1, 8 and 16, 200 requests a pass
R=$1; phase=$2; mkdir -p $R/$phase; t0=$(date +%s)
trap 'tar -C $R -czf $R/$phase.tgz $phase && rm -rf $R/$phase' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/$phase
HERE=benchmarks/results/2026-12-01-h200-rope
OLD=/tmp/omni/ex-cua-s1-old-gdnf NEW=/tmp/omni/ex-cua-s1-gdnf NS=/tmp/omni/ex-cua-s1-ns-gdnf
case $phase in
prep)
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni /tmp/omni-out /tmp/omni-out-old
  # The new prepare writes the checkpoint; the old export starts once it is there.
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $OUT/prepare-new.log 2>&1 &
  until grep -q '^random checkpoint' $OUT/prepare-new.log 2>/dev/null; do sleep 2; done
  (cd .ab/old && OUT=/tmp/omni-out-old EX_SUFFIX=-old KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh \
    prepare cua-s1) > $OUT/prepare-old.log 2>&1
  wait
  for f in $OUT/prepare-*.log; do echo "== $f"; grep -v -i warn $f | tail -3; done
  cp /tmp/omni-out/export-*.log $OUT/export-new.log; cp /tmp/omni-out-old/export-*.log $OUT/export-old.log
  python3 $HERE/variant.py $NEW $NS
  for ex in $OLD $NEW; do
    cp $ex/manifest.json $OUT/manifest-$(basename $ex).json
    python3 -c 'import json, sys; m = json.load(open(sys.argv[1] + "/manifest.json"))
g = m["check"].get("parity_gate", {}); print(sys.argv[1], {k: g.get(k) for k in ("passes", "max_prob_drift",
  "top_choice_identical", "final_hidden_rel_err", "gdn_plan", "device")})' $ex
    python3 -c 'import collections, onnx, sys
print(sys.argv[1], dict(collections.Counter(n.op_type for n in onnx.load(sys.argv[1] + "/model.onnx", load_external_data=False).graph.node).most_common()))' $ex
  done
  echo "== old against new"; python3 $HERE/compare.py $OLD $NEW 2>&1 | grep -v -i warn
  echo "== new against ns"; python3 $HERE/compare.py $NEW $NS 2>&1 | grep -v -i warn ;;
bench)
  nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee $OUT/gpu.csv
  for ex in $OLD $NEW; do
    python3 -m benchmarks.gpu.pass_probe --export $ex --workload benchmarks/workloads/cua_218.jsonl --rows 1,8 \
      --iters 40 --warmup 5 --top 60 --out $OUT/pass-$(basename $ex).json 2>&1 | grep -v -i warn | tail -3
  done
  OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf \
    SERVES="old:K=$OLD new:K=$NEW old2:K=$OLD new2:K=$NEW" \
    WORKLOADS=cua_218 CONCURRENCY=1,8,16 REQUESTS=200 GRANIAN_LOOP=uvloop \
    timeout $(( 580 - $(date +%s) + t0 )) bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|MiB" ;;
esac
echo "$phase $(( $(date +%s) - t0 )) s"
