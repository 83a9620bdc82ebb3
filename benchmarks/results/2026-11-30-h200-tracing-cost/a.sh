#!/usr/bin/env bash
# Call A (one-GPU machine): what tracing costs Laya english fp16 on laya_48, sampling off / 1% /
# 10%, twice in turn. Each server: c=1 and c=64 load passes, then the loop's CPU a request over 6 s
# at c=64. The collector is benchmarks/otlp_sink.py (it accepts every export, so spans cost what
# a real export costs). Last, py-spy on a server with tracing off: where the loop's time goes.
# Two calls on one warm machine: `a.sh $OUT prep` (ONNX Runtime, wheels, the export), then
# `a.sh $OUT bench`. Only a few files come back from a call, so each returns one archive.
R=$1; phase=$2; mkdir -p $R/a; t0=$(date +%s)
trap 'tar -C $R -czf $R/a-$phase.tgz a && rm -rf $R/a' EXIT
trap 'exit 143' TERM
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/a
if [ "$phase" = prep ]; then
  bash .ortgpu/5/install.sh > $R/a/ort-install.log 2>&1; tail -1 $R/a/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -2
  echo "prepared $(( $(date +%s) - t0 )) s"
  exit 0
fi
python3 benchmarks/otlp_sink.py 4318 --host 127.0.0.1 --print-spans > /tmp/spans.jsonl 2>/dev/null &
K=$!
n=0
for cfg in ${CFGS:-off 0.01 0.1 off 0.01 0.1}; do
  n=$((n+1)); port=$((18100+n))
  if [ $cfg = off ]; then
    set -- OTEL_SDK_DISABLED=false
  else
    set -- OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=$cfg
  fi
  env "$@" OMNI_MODELS=/tmp/omni/ex-mha16 OMNI_DEVICE=${DEVICE:-cuda} GRANIAN_LOOP=uvloop taskset -c ${SRV_CPUS:-0-7} python3 -m granian --interface asgi \
    --workers 1 --host 127.0.0.1 --port $port --log-level warning app.main:app > $R/a/server-$n-$cfg.log 2>&1 &
  S=$!
  python3 - $port <<'PY' || { tail -5 $R/a/server-$n-$cfg.log; kill $S; continue; }
import sys, time, urllib.request, urllib.error
deadline = time.time() + 90
while True:
    try:
        urllib.request.urlopen("http://127.0.0.1:%s/readyz" % sys.argv[1]).read(); break
    except (urllib.error.URLError, ConnectionError):
        if time.time() > deadline: sys.exit("not ready in 90 s")
        time.sleep(0.2)
PY
  taskset -c ${LOAD_CPUS:-8-15} python3 -m benchmarks.load --url http://127.0.0.1:$port --workload benchmarks/workloads/laya_48.jsonl \
    --concurrency 1,64 --requests 2000 --procs 8 --out $R/a/http-$n-$cfg.json --label "laya_48 tracing $cfg ($n)" | sed "s/^/$n $cfg /"
  taskset -c ${LOAD_CPUS:-8-15} python3 -m benchmarks.loop_profile --url http://127.0.0.1:$port --pid $S --no-spy --seconds 6 \
    --workload benchmarks/workloads/laya_48.jsonl --concurrency 64 --out $R/a/loop-$n-$cfg.json 2>&1 | head -2 | sed "s/^/$n $cfg /"
  python3 -m benchmarks.scrape http://127.0.0.1:$port > $R/a/metrics-$n-$cfg.txt 2>&1 || true
  kill $S; wait $S 2>/dev/null
  echo "$n $cfg spans received so far: $(wc -l < /tmp/spans.jsonl)"
done
kill $K
# py-spy, tracing off: the loop thread's functions at c=64 (loop_profile starts its own server).
GRANIAN_LOOP=uvloop PATH=/tmp/site/bin:$PATH taskset -c ${SRV_CPUS:-0-15} python3 -m benchmarks.loop_profile --export /tmp/omni/ex-mha16 --device ${DEVICE:-cuda} \
  --workload benchmarks/workloads/laya_48.jsonl --seconds 8 --out $R/a/spy-loop.json 2>&1 | head -60 > $R/a/spy-loop.txt
head -5 $R/a/spy-loop.txt
echo "all $(( $(date +%s) - t0 )) s"
