#!/usr/bin/env bash
# Cua-S1 4B fp16 (gated_delta_net_fused) from one full-size random checkpoint, exported twice side
# by side by this tree: "rows" (--prompt-head in-rows: every row runs the system turn, as before)
# and "head" (the default, baked: the system turn computed once at export, rows start after it).
# After the ort-gpu-carry calls, one call per phase, back to back:
#   h.sh $OUT prep    ONNX Runtime and wheels; the checkpoint; both exports (each records its parity
#                     gate against float32 on CUDA: the whole prompt, head included, from scratch);
#                     answers.py: cua_218's answers through each, alone and batched
#   h.sh $OUT bench   pass_probe at 1 and 8 rows of cua_218; then both served in turn, twice (RSGI,
#                     as served): cua_218 at c=1 and 16, 200 requests a pass
R=$1; phase=$2; mkdir -p $R/$phase; t0=$(date +%s)
trap 'tar -C $R -czf $R/$phase.tgz $phase && rm -rf $R/$phase' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/$phase
HERE=benchmarks/results/2026-12-02-h200-head
ROWS=/tmp/omni/ex-cua-s1-rows-gdnf HEAD=/tmp/omni/ex-cua-s1-gdnf
case $phase in
prep)
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni /tmp/omni-out /tmp/omni-out-rows
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $OUT/prepare-head.log 2>&1 &
  until grep -q '^random checkpoint' $OUT/prepare-head.log 2>/dev/null; do sleep 2; done
  OUT=/tmp/omni-out-rows EX_SUFFIX=-rows PROMPT_HEAD=in-rows KERNELS=gdnf SKIP_WHEELS=1 \
    bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $OUT/prepare-rows.log 2>&1
  wait
  for f in $OUT/prepare-*.log; do echo "== $f"; grep -v -i warn $f | tail -2; done
  cp /tmp/omni-out/export-*.log $OUT/export-head.log; cp /tmp/omni-out-rows/export-*.log $OUT/export-rows.log
  for ex in $ROWS $HEAD; do
    cp $ex/manifest.json $OUT/manifest-$(basename $ex).json
    python3 -c 'import collections, json, onnx, sys; m = json.load(open(sys.argv[1] + "/manifest.json"))
g = m["check"].get("parity_gate", {}); print(sys.argv[1], (m.get("prefix") or {}).get("tokens"), {k: g.get(k) for k in ("passes",
  "max_prob_drift", "top_choice_identical", "final_hidden_rel_err", "gdn_plan", "device")})
print(sys.argv[1], dict(collections.Counter(n.op_type for n in onnx.load(sys.argv[1] + "/model.onnx", load_external_data=False).graph.node).most_common()))' $ex
  done
  echo "== answers: rows (A) against head (B)"
  python3 $HERE/answers.py $ROWS $HEAD benchmarks/workloads/cua_218.jsonl 2>&1 | grep -v -i warn ;;
bench)
  nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee $OUT/gpu.csv
  for ex in $ROWS $HEAD; do
    python3 -m benchmarks.gpu.pass_probe --export $ex --workload benchmarks/workloads/cua_218.jsonl --rows 1,8 \
      --iters 40 --warmup 5 --top 60 --out $OUT/pass-$(basename $ex).json 2>&1 | grep -v -i warn | tail -2
  done
  OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf SERVES="rows:K=$ROWS head:K=$HEAD rows2:K=$ROWS head2:K=$HEAD" \
    WORKLOADS=cua_218 CONCURRENCY=1,16 REQUESTS=200 GRANIAN_LOOP=uvloop \
    timeout $(( 585 - $(date +%s) + t0 )) bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 \
    | grep -v -i warn | grep -E "c=|ready|MiB" ;;
esac
echo "$phase $(( $(date +%s) - t0 )) s"
