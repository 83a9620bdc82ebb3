#!/usr/bin/env bash
# Local observability run: serve (the demo model unless OMNI_MODELS is set), scrape /metrics with
# Debian's Prometheus, drive a mixed load (valid, invalid and unknown-model requests), then
# render the Grafana dashboard's panels from that Prometheus into docs/dashboard.png.
#   apt-get install prometheus; bash deploy/observe_local.sh [minutes-of-load]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
MINUTES=${1:-3}
PORT=18090; PROM_PORT=19090; WORK=$(mktemp -d)
export OMNI_MODELS=${OMNI_MODELS:-$($PY -c 'from app.launch import ensure_demo; print(ensure_demo())')}
$PY -m granian --interface rsgi --workers 1 --loop uvloop --host 127.0.0.1 --port $PORT --log-level warning app.main:app \
  > "$WORK/server.log" 2>&1 &
SERVER=$!
cat > "$WORK/prometheus.yml" <<YML
global: {scrape_interval: 2s, evaluation_interval: 2s}
scrape_configs:
  - job_name: system1-omni
    static_configs: [{targets: ["127.0.0.1:$PORT"]}]
YML
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address=127.0.0.1:$PROM_PORT > "$WORK/prometheus.log" 2>&1 &
PROM=$!
trap 'kill $SERVER $PROM 2>/dev/null || true' EXIT
until curl -sf 127.0.0.1:$PORT/readyz >/dev/null; do sleep 0.2; done
end=$(( $(date +%s) + MINUTES * 60 ))
while [ "$(date +%s)" -lt "$end" ]; do
  for c in 1 4 16; do
    $PY -m benchmarks.load --url http://127.0.0.1:$PORT --workload benchmarks/workloads/laya_mixed.jsonl \
      --concurrency $c --requests 300 --procs 2 >/dev/null
  done
done
sleep 5
$PY deploy/grafana/preview.py --prometheus http://127.0.0.1:$PROM_PORT --minutes "$MINUTES" --out docs/dashboard.png
