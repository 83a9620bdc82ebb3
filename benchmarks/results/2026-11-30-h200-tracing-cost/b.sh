#!/usr/bin/env bash
# Call B (same warm machine, after a.sh prep): the tokenizer's thread pool. py-spy in call A put
# 22% of the loop thread's samples in `encode` (tokenizers' encode_batch_fast, one text). Four
# servers, tracing off: TOKENIZERS_PARALLELISM unset / false, twice in turn; each c=1 and c=64
# load passes and the loop's CPU a request over 6 s at c=64; py-spy on `false`; and one encode
# call timed in-process with the export's own tokenizer, both ways.
R=$1; phase=b; mkdir -p $R/a; t0=$(date +%s)
trap 'tar -C $R -czf $R/a-$phase.tgz a && rm -rf $R/a' EXIT
trap 'exit 143' TERM
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/a
D=benchmarks/results/2026-11-30-h200-tracing-cost
for tp in unset false; do
  if [ $tp = unset ]; then taskset -c 0-7 python3 $D/tokbench.py /tmp/omni/ex-mha16/tokenizer.json; else
    TOKENIZERS_PARALLELISM=false taskset -c 0-7 python3 $D/tokbench.py /tmp/omni/ex-mha16/tokenizer.json; fi
done 2>&1 | tee $R/a/tokbench.txt
n=0
for cfg in unset false unset false; do
  n=$((n+1)); port=$((18200+n))
  if [ $cfg = unset ]; then set -- OTEL_SDK_DISABLED=false; else set -- TOKENIZERS_PARALLELISM=false; fi
  env "$@" OMNI_MODELS=/tmp/omni/ex-mha16 OMNI_DEVICE=cuda GRANIAN_LOOP=uvloop taskset -c 0-7 python3 -m granian --interface asgi \
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
  taskset -c 8-15 python3 -m benchmarks.load --url http://127.0.0.1:$port --workload benchmarks/workloads/laya_48.jsonl \
    --concurrency 1,64 --requests 2000 --procs 8 --out $R/a/http-$n-$cfg.json --label "laya_48 TOKENIZERS_PARALLELISM $cfg ($n)" | sed "s/^/$n $cfg /"
  taskset -c 8-15 python3 -m benchmarks.loop_profile --url http://127.0.0.1:$port --pid $S --no-spy --seconds 6 \
    --workload benchmarks/workloads/laya_48.jsonl --concurrency 64 --out $R/a/loop-$n-$cfg.json 2>&1 | head -2 | sed "s/^/$n $cfg /"
  python3 -m benchmarks.scrape http://127.0.0.1:$port > $R/a/metrics-$n-$cfg.txt 2>&1 || true
  kill $S; wait $S 2>/dev/null
done
TOKENIZERS_PARALLELISM=false GRANIAN_LOOP=uvloop PATH=/tmp/site/bin:$PATH taskset -c 0-15 python3 -m benchmarks.loop_profile \
  --export /tmp/omni/ex-mha16 --device cuda --workload benchmarks/workloads/laya_48.jsonl --seconds 8 \
  --out $R/a/spy-loop-tp-false.json 2>&1 | head -60 > $R/a/spy-loop-tp-false.txt
head -40 $R/a/spy-loop-tp-false.txt
echo "all $(( $(date +%s) - t0 )) s"
