#!/usr/bin/env bash
# Tracing on vs off, side by side in one run: two servers on the same model (the demo unless
# OMNI_MODELS is set), one exporting every span over OTLP/HTTP to a local sink, the other with
# tracing off; load passes alternate between them at c=1 and c=16.
#   bash benchmarks/tracing_overhead.sh [rounds]      # every request traced
#   ON_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.1 OUT=benchmarks/results/tracing/cpu-demo/ratio0.1 \
#     bash benchmarks/tracing_overhead.sh 3            # 10% sampled (docs/observability.md)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
ROUNDS=${1:-3}
OUT=${OUT:-benchmarks/results/tracing/cpu-demo/all}
mkdir -p "$OUT"
export OMNI_MODELS=${OMNI_MODELS:-$($PY -c 'from app.launch import ensure_demo; print(ensure_demo())')}
$PY benchmarks/otlp_sink.py 14318 & SINK=$!
OTEL_SDK_DISABLED=true $PY -m granian --interface ${GRANIAN_INTERFACE:-rsgi} --workers 1 --host 127.0.0.1 --port 18101 \
  --log-level warning app.main:app > "$OUT/off.log" 2>&1 & OFF=$!
OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:14318 OTEL_TRACES_SAMPLER=${ON_SAMPLER:-parentbased_always_on} $PY -m granian --interface ${GRANIAN_INTERFACE:-rsgi} --workers 1 \
  --host 127.0.0.1 --port 18102 --log-level warning app.main:app > "$OUT/on.log" 2>&1 & ON=$!
trap 'kill $SINK $OFF $ON 2>/dev/null || true' EXIT
for port in 18101 18102; do until curl -sf 127.0.0.1:$port/readyz >/dev/null; do sleep 0.2; done; done
for r in $(seq 1 "$ROUNDS"); do
  for mode in off on; do
    port=$([ $mode = off ] && echo 18101 || echo 18102)
    $PY -m benchmarks.load --url http://127.0.0.1:$port --workload benchmarks/workloads/laya_1q.jsonl \
      --concurrency 1,16 --requests 800 --procs 1 --label "tracing $mode round $r" --out "$OUT/$mode-$r.json"
  done
done
$PY - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for c in (1, 16):
    row = {}
    for mode in ("off", "on"):
        p50s, rps = [], []
        for r in range(1, rounds + 1):
            lvl = [l for l in json.load(open("%s/%s-%d.json" % (out, mode, r)))["levels"] if l["concurrency"] == c][0]
            p50s += [p["p50_ms"] for p in lvl["passes"]]
            rps += [p["requests_per_s"] for p in lvl["passes"]]
        row[mode] = (statistics.median(p50s), statistics.median(rps))
    print("c=%-2d p50 off %.2f ms on %.2f ms (%+.1f%%) | req/s off %.0f on %.0f (%+.1f%%)" % (
        c, row["off"][0], row["on"][0], 100 * (row["on"][0] / row["off"][0] - 1),
        row["off"][1], row["on"][1], 100 * (row["on"][1] / row["off"][1] - 1)))
PY
