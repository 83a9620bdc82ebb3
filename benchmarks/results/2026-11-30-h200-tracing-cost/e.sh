#!/usr/bin/env bash
# Call E (after a.sh prep on the same machine): as call C, at c=1, 8 and 16 (the targets'
# c=16 >= 4x c=1), main (.base/prev, before the per-turn preparation) against the working tree.
R=$1; phase=e; mkdir -p $R/a; t0=$(date +%s)
trap 'tar -C $R -czf $R/a-$phase.tgz a && rm -rf $R/a' EXIT
trap 'exit 143' TERM
export PYTHONUNBUFFERED=1 OUT=$R/a
n=0
for cfg in main branch main branch; do
  n=$((n+1)); port=$((18400+n))
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
    --concurrency 1,8,16 --requests 2000 --procs 8 --out $R/a/http-$n-$cfg.json --label "laya_48 code $cfg ($n)" | sed "s/^/$n $cfg /"
  PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD python3 -m benchmarks.scrape http://127.0.0.1:$port > $R/a/metrics-$n-$cfg.txt 2>&1 || true
  kill $S; wait $S 2>/dev/null
done
echo "all $(( $(date +%s) - t0 )) s"
