#!/usr/bin/env bash
# Traffic rows on the GPU machine (one `run` call; benchmarks/gpu/README.md): each export served
# by this checkout and, with BASE, by another commit's app/ and models/ side by side on the same
# GPU, loaded with seeded traffic from the export's own limits (benchmarks.traffic) at c=1, 16
# and 64. Each level's requests/s, decisions/s, real tokens/s and achieved TFLOP/s (share of
# PEAK) go to $OUT/traffic-<export>-<side>.json (benchmarks.load's report).
#   EXPORTS="/tmp/omni/ex-mha16 /tmp/omni/ex-cua-s1-gdnf" BASE=.base bash benchmarks/gpu/traffic.sh
# EXPORTS      export directories, prepared by laya.sh / qwen.sh prepare (required)
# BASE         a directory holding another commit's app/ and models/ (`git archive COMMIT app models
#              | tar -x -C .base`, carried), served as side "base"; unset: this checkout only
# BASE_EXPORTS the base side's exports, in EXPORTS' order, where its graph takes other inputs
#              (laya.sh prepare's LABEL=DTYPE:.base writes them); unset: EXPORTS
# ORDER        the sides' order (default "new base"; "base new" runs the base first)
# EXTRA        more workloads (JSONL files) each side gets at c=1 after the traffic, into
#              extra-<workload>-<export>-<side>.json (e.g. benchmarks/workloads/laya_48.jsonl)
# CONCURRENCY  default 1,16,64; REQUESTS a measured pass (default 256); N traffic lines (default 256)
# PEAK         the GPU's dense fp16 TFLOP/s (default 989: H100 SXM and H200)
# DEVICE       OMNI_DEVICE of the servers (default cuda; the CPU suite runs the script with cpu)
# SERVER_ENV   NAME=VALUE settings for this checkout's server (e.g. OMNI_CUDA_GRAPHS=0), with TAG
#              naming its files apart (side new-TAG)
# onnxruntime-gpu must be unpacked in /tmp/ortsite and the wheels installed in /tmp/site.
set -euo pipefail
OUT=${OUT:-/tmp/omni-out}
PEAK=${PEAK:-989}
mkdir -p "$OUT"
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD PYTHONUNBUFFERED=1
if [ "${DEVICE:-cuda}" != cpu ]; then nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"; fi
port=${PORT:-18100}
read -r -a bases <<< "${BASE_EXPORTS:-}"
i=0
for ex in ${EXPORTS:?export directories}; do
  name=$(basename "$ex"); base_ex=${bases[$i]:-$ex}; i=$((i + 1))
  python3 -m benchmarks.traffic --export "$ex" --n "${N:-256}" --seed 60 --out "$OUT/traffic-$name.jsonl"
  params=$(python3 -m benchmarks.traffic --export "$ex" --params)
  echo "$name: $params B dense parameters"
  sides="new${TAG:+-$TAG} ${BASE:+base}"
  [ "${ORDER:-new base}" = "base new" ] && sides="${BASE:+base} new${TAG:+-$TAG}"
  for side in $sides; do
    code=$PWD; settings=${SERVER_ENV:-}; served=$ex
    [ "$side" = base ] && { code=$(cd "$BASE" && pwd); settings=; served=$base_ex; }
    t0=$(python3 -c 'import time; print(time.time())')
    (cd "$code" && PYTHONPATH=/tmp/ortsite:/tmp/site:$code exec env GRANIAN_LOOP=uvloop $settings OMNI_MODELS="$served" \
      OMNI_DEVICE="${DEVICE:-cuda}" python3 -m granian --interface rsgi --workers 1 --host 127.0.0.1 --port $port \
      --log-level warning app.main:app) > "$OUT/server-$name-$side.log" 2>&1 &
    S=$!
    python3 -m benchmarks.startup --since "$t0" --port $port --pid $S --first "$OUT/traffic-$name.jsonl" \
      | tee "$OUT/startup-$name-$side.txt" || { tail -20 "$OUT/server-$name-$side.log"; kill $S; continue; }
    python3 -m benchmarks.load --url http://127.0.0.1:$port --workload "$OUT/traffic-$name.jsonl" \
      --concurrency "${CONCURRENCY:-1,16,64}" --requests "${REQUESTS:-256}" --warmup "${N:-256}" \
      --params-b "$params" --peak-tflops "$PEAK" --label "$name-$side" --out "$OUT/traffic-$name-$side.json"
    for w in ${EXTRA:-}; do
      python3 -m benchmarks.load --url http://127.0.0.1:$port --workload "$w" --concurrency 1 \
        --requests "${REQUESTS:-256}" --warmup "${N:-256}" --label "$(basename "$w" .jsonl)-$name-$side" \
        --out "$OUT/extra-$(basename "$w" .jsonl)-$name-$side.json"
    done
    kill $S; wait $S 2>/dev/null || true
    port=$((port + 1))
  done
done
