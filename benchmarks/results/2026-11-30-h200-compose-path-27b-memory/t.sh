#!/usr/bin/env bash
# Call T (one-GPU machine): what compose's default tracing (OTLP to a collector, 10% of requests
# sampled) costs Laya english fp16 on laya_48. Four servers in turn, tracing off / on / off / on,
# each: c=1 and c=64 load passes, then the loop's CPU a request over 6 s at c=64. The collector is
# benchmarks/otlp_sink.py (it accepts every export, so spans cost what a real export costs).
R=$1; mkdir -p $R/t; t0=$(date +%s)
bash .ortgpu/5/install.sh > $R/t/ort-install.log 2>&1; tail -1 $R/t/ort-install.log
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/t
EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -2
echo "prepared $(( $(date +%s) - t0 )) s"
python3 benchmarks/otlp_sink.py 4318 --host 127.0.0.1 > /dev/null 2>&1 &
K=$!
n=0
for cfg in off on off on; do
  n=$((n+1)); port=$((18100+n))
  if [ $cfg = on ]; then
    set -- OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_TRACES_SAMPLER=parentbased_traceidratio OTEL_TRACES_SAMPLER_ARG=0.1
  else
    set -- OTEL_SDK_DISABLED=false
  fi
  env "$@" OMNI_MODELS=/tmp/omni/ex-mha16 OMNI_DEVICE=cuda GRANIAN_LOOP=uvloop taskset -c 0-7 python3 -m granian --interface asgi \
    --workers 1 --host 127.0.0.1 --port $port --log-level warning app.main:app > $R/t/server-$n-$cfg.log 2>&1 &
  S=$!
  python3 - $port <<'PY' || { tail -5 $R/t/server-$n-$cfg.log; kill $S; continue; }
import sys, time, urllib.request, urllib.error
deadline = time.time() + 90
while True:
    try:
        urllib.request.urlopen("http://127.0.0.1:%s/readyz" % sys.argv[1]).read(); break
    except (urllib.error.URLError, ConnectionError):
        if time.time() > deadline: sys.exit("not ready in 90 s")
        time.sleep(0.2)
PY
  taskset -c 8-15 python3 -m benchmarks.load --url http://127.0.0.1:$port --workload benchmarks/workloads/laya_48.jsonl \
    --concurrency 1,64 --requests 3200 --procs 8 --out $R/t/http-$n-$cfg.json --label "laya_48 tracing $cfg ($n)" | sed "s/^/$n $cfg /"
  taskset -c 8-15 python3 -m benchmarks.loop_profile --url http://127.0.0.1:$port --pid $S --no-spy --seconds 6 \
    --workload benchmarks/workloads/laya_48.jsonl --concurrency 64 --out $R/t/loop-$n-$cfg.json 2>&1 | head -2 | sed "s/^/$n $cfg /"
  kill $S; wait $S 2>/dev/null
done
kill $K
echo "all $(( $(date +%s) - t0 )) s"
