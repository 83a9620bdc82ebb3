#!/usr/bin/env bash
# Run in the clefbatch session (2026-12-02; results in raw/n/, docs/benchmarks.md). Written before it ran:
# Does the full-size batched Clef-Flash graph, with the head that no longer computes on the CPU
# (5ddeaff), capture as CUDA graphs, and what does it serve? After the ort-gpu-carry calls:
#   next.sh $OUT prep    # checkpoint, fp16 gdnf export with --records batched (~250 s), pass_probe with graphs
#   next.sh $OUT bench   # clef_1q c=1, 8, 16 and clef_4q c=1, 8: batched, then one record a take
# Expect /readyz cuda_graphs "on" (not "refused"), pass_probe "captured", c=1 near the single-record
# graph's 13.2 ms and c=8-16 near the uncaptured batched 106-111 requests/s or above. If so,
# make `--records batched` the default (models/clef_flash/export.py) and compose re-exports.
R=$1; STEP=$2; mkdir -p $R/n; t0=$(date +%s)
trap 'tar -C $R -czf $R/n-$STEP.tgz n && rm -rf $R/n' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/n
EX=/tmp/omni/ex-clef-flash-gdnf
if [ "$STEP" = prep ]; then
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni /tmp/omni-out
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 RECORDS=batched bash benchmarks/gpu/qwen_h200.sh prepare clef-flash > $OUT/prepare.log 2>&1
  grep -v -i warn $OUT/prepare.log | tail -2
  python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); print(m["export_options"], m["check"].get("parity_gate", {}).get("passes"))' $EX/manifest.json
  echo "prepared $(( $(date +%s) - t0 )) s"
  python3 -m benchmarks.gpu.pass_probe --export $EX --workload benchmarks/workloads/clef_1q.jsonl --rows 1,2,4,8 \
    --iters 20 --warmup 3 --out $OUT/pass.json 2>&1 | grep -v -i warn | tail -6
  echo "probed $(( $(date +%s) - t0 )) s"
else
  for w in "clef_1q 1,8,16" "clef_4q 1,8"; do set -- $w
    OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf WORKLOADS=$1 CONCURRENCY=$2 REQUESTS=64 \
      SERVES="batched-$1 single-$1:OMNI_MAX_BATCH_ROWS=1" \
      LOAD_ARGS="--warmup 32" GRANIAN_LOOP=uvloop timeout ${LIMIT:-280} \
      bash benchmarks/gpu/qwen_h200.sh bench clef-flash 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB|rror"
  done
  grep -h "cuda_graphs" $OUT/readyz-*.json | head -4
  grep -h -i "captured CUDA graph\|cannot be captured\|Traceback" $OUT/server-*.log | sed 's/^.*\] //' | sort | uniq -c | sort -rn | head -8
  echo "done $(( $(date +%s) - t0 )) s"
fi
