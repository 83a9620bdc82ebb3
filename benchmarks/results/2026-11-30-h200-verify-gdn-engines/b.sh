#!/usr/bin/env bash
# Call B: the Cua-S1 export of call A (streaming fold): start-to-ready twice; pass_probe at 218
# tokens (1, 4, 16 rows: replay vs plain run, kernels) and one row of ~1,000 and ~3,400 tokens
# (kernels); four servers, Granian's runtime mode mt and st alternated, cua_218 at c=1,4,16.
R=$1; export OUT=/tmp/omni-out/b; mkdir -p $OUT /tmp/omni
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
t0=$(date +%s)
EX=/tmp/omni/ex-cua-s1-new
for i in 1 2; do
  s=$(date +%s.%N)
  OMNI_MODELS=$EX OMNI_DEVICE=cuda GRANIAN_LOOP=uvloop python3 -m granian --interface asgi --workers 1 --host 127.0.0.1 \
    --port 18090 --log-level warning app.main:app > $OUT/server-start-$i.log 2>&1 &
  S=$!
  python3 - "$s" <<'PY'
import json, sys, time, urllib.request, urllib.error
t0 = float(sys.argv[1]); deadline = time.time() + 150
while True:
    try:
        body = urllib.request.urlopen("http://127.0.0.1:18090/readyz").read(); break
    except (urllib.error.URLError, ConnectionError):
        if time.time() > deadline: sys.exit("not ready in 150 s")
        time.sleep(0.2)
m = json.loads(body)["models"][0]
print("start-to-ready %.1f s, load %.0f ms, warm-up %.0f ms" % (time.time() - t0, m["load_ms"], m["warmup_ms"]))
PY
  kill $S; wait $S 2>/dev/null; sleep 1
done 2>&1 | tee $OUT/ready.txt
python3 - $EX <<'PY'
# Workloads of one request at ~1,000 and ~3,400 prompt tokens: cua_218's first request, its state grown.
import json, sys
from models.registry import load
m = load(sys.argv[1])
base = json.loads(open("benchmarks/workloads/cua_218.jsonl").readline())
lines = base["state"].split("\n")
for target in (1000, 3400):
    state = list(lines)
    while True:
        body = dict(base, state="\n".join(state))
        n = m.prepare(body).tokens
        if n >= target: break
        state += lines
    open("/tmp/cua_%d.jsonl" % target, "w").write(json.dumps(body) + "\n")
    print("workload /tmp/cua_%d.jsonl: %d tokens" % (target, n))
PY
timeout 150 python3 -m benchmarks.gpu.pass_probe --export $EX --rows 1,4,16 --iters 40 --warmup 5 --top 14 \
  --workload benchmarks/workloads/cua_218.jsonl --out $OUT/pass_probe_cua218.json 2>&1 | grep -v -i warn | tail -3
for n in 1000 3400; do
  timeout 100 python3 -m benchmarks.gpu.pass_probe --export $EX --rows 1 --iters 10 --warmup 3 --top 16 \
    --workload /tmp/cua_$n.jsonl --out $OUT/pass_probe_cua$n.json 2>&1 | grep -v -i warn | tail -1
done
echo "probes $(( $(date +%s) - t0 )) s"
OUT=$OUT INPROCESS=0 HF=0 KERNELS="new" SERVES="mt:K=new st:K=new,GRANIAN_RUNTIME_MODE=st mtb:K=new stb:K=new,GRANIAN_RUNTIME_MODE=st" \
  WORKLOADS=cua_218 CONCURRENCY=1,4,16 REQUESTS=200 GRANIAN_LOOP=uvloop timeout 300 bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 \
  | grep -v -i warn | grep -E "c=|ready|MiB" | tail -30
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/b.tgz -C $OUT .
