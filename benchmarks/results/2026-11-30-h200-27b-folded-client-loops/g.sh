#!/usr/bin/env bash
# Call G (two-GPU machine): Open-Jev-27B-v1.1 random checkpoint and fp16 export with main's
# streaming fold, in the background on GPU 0's side (cores 0-15), its processes' RSS sampled;
# meanwhile on GPU 1 (cores 16-31) Laya english fp16, one server, and the load generator's client
# kinds at c=1 (asyncio, uvloop, blocking sockets, alternated twice) and c=64 (asyncio, uvloop).
R=$1; export OUT=/tmp/omni-out/g; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
nproc; free -g | head -2; df -h /tmp | tail -1
t0=$(date +%s)
JEV=27b KERNELS=gdnf SKIP_WHEELS=1 DETACH=1 taskset -c 0-15 bash benchmarks/gpu/qwen_h200.sh prepare open-jev
# Peak RSS of the 27B build: every 2 s, the summed RSS of the processes running its modules.
(setsid nohup bash .base/rss.sh > /dev/null 2>&1 &)
CUDA_VISIBLE_DEVICES=1 EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 taskset -c 16-31 bash benchmarks/gpu/laya_h200.sh prepare \
  2>&1 | grep -v -i warn | tail -2
echo "laya prepared $(( $(date +%s) - t0 )) s"
CUDA_VISIBLE_DEVICES=1 OMNI_MODELS=/tmp/omni/ex-mha16 OMNI_DEVICE=cuda GRANIAN_LOOP=uvloop taskset -c 16-23 \
  python3 -m granian --interface asgi --workers 1 --host 127.0.0.1 --port 18080 --log-level warning app.main:app \
  > $OUT/server-laya.log 2>&1 &
S=$!
python3 - <<'PY'
import time, urllib.request, urllib.error
deadline = time.time() + 180
while True:
    try:
        urllib.request.urlopen("http://127.0.0.1:18080/readyz").read(); break
    except (urllib.error.URLError, ConnectionError):
        if time.time() > deadline: raise SystemExit("laya not ready in 180 s")
        time.sleep(0.2)
print("laya ready")
PY
for round in 1 2; do
  for kind in asyncio uvloop blocking; do
    taskset -c 24-31 python3 -m benchmarks.load --url http://127.0.0.1:18080 --workload benchmarks/workloads/laya_48.jsonl \
      --concurrency 1 --requests 600 --warmup 200 --procs 1 --client-loop $kind \
      --out $OUT/http_c1_${kind}_$round.json --label "c=1 $kind round $round" | sed "s/^/$kind $round /"
  done
done
for kind in asyncio uvloop asyncio uvloop; do
  taskset -c 24-31 python3 -m benchmarks.load --url http://127.0.0.1:18080 --workload benchmarks/workloads/laya_48.jsonl \
    --concurrency 64 --requests 6400 --procs 8 --client-loop $kind --out $OUT/http_c64_${kind}_$RANDOM.json | sed "s/^/$kind /"
done
kill $S; wait $S 2>/dev/null
echo "laya done $(( $(date +%s) - t0 )) s"
tar czf $R/g.tgz -C $OUT .
WAIT_S=$(( 570 - $(date +%s) + t0 )) TAIL=4 bash benchmarks/gpu/qwen_h200.sh wait open-jev
tail -2 /tmp/omni/rss.txt
