#!/usr/bin/env bash
# Call C: Laya english fp16 prepared while Cua-S1 4B fp16 is exported; four Laya servers, Granian's
# runtime mode st and mt alternated in the reverse order of call A; pass_probe on Cua-S1 with the
# served GatedDeltaNet engine (chunked_split): 218 tokens at 1, 4, 16 rows, one row of ~1,000 and ~3,400.
R=$1; export OUT=/tmp/omni-out/c; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
t0=$(date +%s)
( python3 -m models.qwen35.random_checkpoint /tmp/omni/ck-4b --size 4b > $OUT/ck-4b.log 2>&1
  python3 -m models.export cua-s1 --checkpoint /tmp/omni/ck-4b --out /tmp/omni/ex-cua-s1-new \
    --dtype float16 --gdn-kernel gated_delta_net_fused --parity-gate record > $OUT/export-cua.log 2>&1 ) &
CUA=$!
EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -2
wait $CUA
grep -E "fold|parity gate vs|exported" $OUT/export-cua.log | tail -3
echo "prepared $(( $(date +%s) - t0 )) s"
SERVERS="mha16:64::uvloop::GRANIAN_RUNTIME_MODE=st mha16:64::uvloop mha16:64::uvloop::GRANIAN_RUNTIME_MODE=st,A=2 mha16:64::uvloop::A=2" \
WORKLOADS1Q="laya_48" WORKLOADS3Q="" INPROCESS=0 timeout 300 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn | grep -E "c=1 |c=64|CPU per" | tail -20
echo "servers $(( $(date +%s) - t0 )) s"
EX=/tmp/omni/ex-cua-s1-new
python3 - $EX <<'PY'
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
PY
timeout 150 python3 -m benchmarks.gpu.pass_probe --export $EX --rows 1,4,16 --iters 40 --warmup 5 --top 14 \
  --workload benchmarks/workloads/cua_218.jsonl --out $OUT/pass_probe_cua218.json 2>&1 | grep -v -i warn | tail -3
for n in 1000 3400; do
  timeout 100 python3 -m benchmarks.gpu.pass_probe --export $EX --rows 1 --iters 10 --warmup 3 --top 16 \
    --workload /tmp/cua_$n.jsonl --out $OUT/pass_probe_cua$n.json 2>&1 | grep -v -i warn | tail -1
done
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/c.tgz -C $OUT .
