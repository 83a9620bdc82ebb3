#!/usr/bin/env bash
# Call I: the 27B export of call G (folded): start-to-ready twice; pass_probe (CUPTI) on one row
# of the mix's shortest, ~1,000-token and longest requests; the noul mix over HTTP at c=1 and c=4.
R=$1; export OUT=/tmp/omni-out/i; mkdir -p $OUT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
[ -f /tmp/omni/prepare-open-jev.done ] || WAIT_S=240 TAIL=3 bash benchmarks/gpu/qwen_h200.sh wait open-jev
EX=/tmp/omni/ex-open-jev-gdnf
cp /tmp/omni/prepare-open-jev.log /tmp/omni/rss.txt $OUT/ 2>/dev/null; cp /tmp/omni-out/export-open-jev-gdnf.log $OUT/ 2>/dev/null
cp $EX/manifest.json $OUT/manifest.json
grep -v -i warn $OUT/export-open-jev-gdnf.log | grep -i -E "fold|gate|exported" | tail -4
ls -la $EX; du -sh $EX; sort -k2 -n /tmp/omni/rss.txt | tail -1
t0=$(date +%s)
for i in 1 2; do
  s=$(date +%s.%N)
  OMNI_MODELS=$EX OMNI_DEVICE=cuda GRANIAN_LOOP=uvloop python3 -m granian --interface asgi --workers 1 --host 127.0.0.1 \
    --port 18090 --log-level warning app.main:app > $OUT/server-start-$i.log 2>&1 &
  S=$!
  python3 - "$s" <<'PY'
import json, sys, time, urllib.request, urllib.error
t0 = float(sys.argv[1]); deadline = time.time() + 300
while True:
    try:
        body = urllib.request.urlopen("http://127.0.0.1:18090/readyz").read(); break
    except (urllib.error.URLError, ConnectionError):
        if time.time() > deadline: sys.exit("not ready in 300 s")
        time.sleep(0.2)
m = json.loads(body)["models"][0]
print("start-to-ready %.1f s, load %.0f ms, warm-up %.0f ms" % (time.time() - t0, m["load_ms"], m["warmup_ms"]))
PY
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader | head -1
  kill $S; wait $S 2>/dev/null; sleep 1
done 2>&1 | tee $OUT/ready.txt
python3 - $EX <<'PY'
# One-request workloads: the mix's shortest, nearest to 1,000 and longest states (by state tokens).
import json, sys
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1] + "/tokenizer.json")
lines = open("benchmarks/workloads/open_jev_noul_27b.jsonl").read().splitlines()
n = sorted((len(tok.encode(json.loads(l)["state"]).ids), i) for i, l in enumerate(lines))
for name, (tokens, i) in (("short", n[0]), ("mid", min(n, key=lambda x: abs(x[0] - 1000))), ("long", n[-1])):
    open("/tmp/jev_%s.jsonl" % name, "w").write(lines[i] + "\n")
    print("workload /tmp/jev_%s.jsonl: line %d, %d state tokens" % (name, i, tokens))
PY
for n in short mid long; do
  timeout 200 python3 -m benchmarks.gpu.pass_probe --export $EX --rows 1 --iters 5 --warmup 2 --top 16 \
    --workload /tmp/jev_$n.jsonl --out $OUT/pass_probe_jev_$n.json 2>&1 | grep -v -i warn | tail -1
done
echo "probes $(( $(date +%s) - t0 )) s"
OUT=$OUT JEV=27b INPROCESS=0 HF=0 KERNELS=gdnf WORKLOADS=open_jev_noul_27b CONCURRENCY=1,4 REQUESTS=48 \
  LOAD_ARGS="--warmup 96" GRANIAN_LOOP=uvloop timeout 330 bash benchmarks/gpu/qwen_h200.sh bench open-jev 2>&1 \
  | grep -v -i warn | grep -E "c=|ready|MiB" | tail -8
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/i.tgz -C $OUT .
