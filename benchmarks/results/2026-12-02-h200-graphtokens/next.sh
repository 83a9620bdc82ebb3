#!/usr/bin/env bash
# Run in the graphtokens session (2026-12-02; results in raw/, README.md, docs/benchmarks.md). Written
# before it ran, in the clefbatch session: does capturing passes past the
# Qwen families' 1,024-token graph bound serve more at c=8-16? OMNI_CUDA_GRAPH_TOKENS (app/config.py)
# raises the bound. On the H200 an eight-row Cua-S1 pass (8 x 144 tokens after the baked head)
# ran 29.9 ms uncaptured against 27.8 ms of GPU time. After the ort-gpu-carry calls:
#   next.sh $OUT prep    checkpoint, fp16 gdnf export (~160 s); pass_probe at 8 and 16 rows, bound 1,024 then 4,096
#   next.sh $OUT bench   cua_218 at c=1, 8, 16: the default bound, then 4,096, twice in turn
R=$1; STEP=$2; mkdir -p $R/g; t0=$(date +%s)
trap 'tar -C $R -czf $R/g-$STEP.tgz g && rm -rf $R/g' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/g
EX=/tmp/omni/ex-cua-s1-gdnf
if [ "$STEP" = prep ]; then
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  mkdir -p /tmp/omni /tmp/omni-out
  OUT=/tmp/omni-out KERNELS=gdnf SKIP_WHEELS=1 bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 > $OUT/prepare.log 2>&1
  grep -v -i warn $OUT/prepare.log | tail -2; echo "prepared $(( $(date +%s) - t0 )) s"
  for bound in 0 4096; do
    OMNI_CUDA_GRAPH_TOKENS=$bound python3 -m benchmarks.gpu.pass_probe --export $EX --workload benchmarks/workloads/cua_218.jsonl \
      --rows 8,16 --iters 30 --warmup 3 --out $OUT/pass-$bound.json 2>&1 | grep -v -i warn | grep -E "rows|rror"
  done
  echo "probed $(( $(date +%s) - t0 )) s"
else
  OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf WORKLOADS=cua_218 CONCURRENCY=1,8,16 REQUESTS=200 \
    SERVES="bound1024 bound4096:OMNI_CUDA_GRAPH_TOKENS=4096 bound1024b bound4096b:OMNI_CUDA_GRAPH_TOKENS=4096" \
    timeout ${LIMIT:-500} bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 | grep -v -i warn | grep -E "c=|ready|MiB|rror"
  grep -h -i "captured CUDA graph" $OUT/server-*4096*.log | sed 's/^.*\] //' | tail -4
  echo "done $(( $(date +%s) - t0 )) s"
fi
