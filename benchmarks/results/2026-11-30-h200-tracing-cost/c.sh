#!/usr/bin/env bash
# Call C (after a.sh prep on the same machine): requests prepared per loop turn (the branch, the
# working tree) against main (.base/prev = git archive HEAD app models), alternated, four servers,
# tracing off. Each: c=1 and c=64 load passes, the loop's CPU a request over 6 s at c=64; then
# py-spy on the branch.
R=$1; phase=c; mkdir -p $R/a; t0=$(date +%s)
trap 'tar -C $R -czf $R/a-$phase.tgz a && rm -rf $R/a' EXIT
trap 'exit 143' TERM
export PYTHONUNBUFFERED=1 OUT=$R/a
n=0
for cfg in main branch main branch; do
  n=$((n+1)); port=$((18300+n))
  if [ $cfg = main ]; then code=$(cd .base/prev && pwd); else code=$PWD; fi
  set -- OTEL_SDK_DISABLED=false
  (cd $code && PYTHONPATH=/tmp/ortsite:/tmp/site:$code exec env "$@" OMNI_MODELS=/tmp/omni/ex-mha16 OMNI_DEVICE=cuda GRANIAN_LOOP=uvloop \
    taskset -c 0-7 python3 -m granian --interface asgi --workers 1 --host 127.0.0.1 --port $port --log-level warning \
    app.main:app) > $R/a/server-$n-$cfg.log 2>&1 &
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
  PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD taskset -c 8-15 python3 -m benchmarks.load --url http://127.0.0.1:$port --workload benchmarks/workloads/laya_48.jsonl \
    --concurrency 1,64 --requests 2000 --procs 8 --out $R/a/http-$n-$cfg.json --label "laya_48 code $cfg ($n)" | sed "s/^/$n $cfg /"
  PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD taskset -c 8-15 python3 -m benchmarks.loop_profile --url http://127.0.0.1:$port --pid $S --no-spy --seconds 6 \
    --workload benchmarks/workloads/laya_48.jsonl --concurrency 64 --out $R/a/loop-$n-$cfg.json 2>&1 | head -2 | sed "s/^/$n $cfg /"
  PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD python3 -m benchmarks.scrape http://127.0.0.1:$port > $R/a/metrics-$n-$cfg.txt 2>&1 || true
  kill $S; wait $S 2>/dev/null
done
PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD GRANIAN_LOOP=uvloop PATH=/tmp/site/bin:$PATH taskset -c 0-15 python3 -m benchmarks.loop_profile \
  --export /tmp/omni/ex-mha16 --device cuda --workload benchmarks/workloads/laya_48.jsonl --seconds 8 \
  --out $R/a/spy-loop-branch.json 2>&1 | head -60 > $R/a/spy-loop-branch.txt
head -45 $R/a/spy-loop-branch.txt
echo "all $(( $(date +%s) - t0 )) s"
