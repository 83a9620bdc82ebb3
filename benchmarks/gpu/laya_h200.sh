#!/usr/bin/env bash
# The Laya GPU session on the device machine, in two phases (each one `run` call):
#   bash benchmarks/gpu/laya_h200.sh prepare   # wheels, full-size random english Laya, export
#   bash benchmarks/gpu/laya_h200.sh bench     # serve on CUDA, HTTP load, in-process baselines
# onnxruntime-gpu must already be unpacked in /tmp/ortsite (../shared/tools/ort-gpu-carry), and
# `.whl` carried in the prepare call (benchmarks/gpu/wheels.sh downloads what the machine lacks).
# DTYPE=float16 exports (prepare) and serves (bench) the fp16 graph, /tmp/omni/ex-english-float16.
set -euo pipefail
phase=${1:?prepare or bench}
OUT=${OUT:-/tmp/omni-out}
mkdir -p "$OUT" /tmp/omni
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD PYTHONUNBUFFERED=1
EX=/tmp/omni/ex-english; [ "${DTYPE:-float32}" = float32 ] || EX=/tmp/omni/ex-english-$DTYPE
if [ "$phase" = prepare ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  python3 - <<'PY'
import onnxruntime as o, torch, transformers
o.preload_dlls()
print("onnxruntime", o.__version__, o.get_available_providers(), "torch", torch.__version__, "transformers", transformers.__version__)
PY
  t0=$(date +%s)
  [ -f /tmp/omni/ck-english/model.safetensors ] || python3 -m models.laya.random_checkpoint /tmp/omni/ck-english --variant english --size full
  python3 -m models.export laya --checkpoint /tmp/omni/ck-english --out $EX --dtype ${DTYPE:-float32}
  echo "build+export $(( $(date +%s) - t0 )) s"
  du -sh $EX
  exit 0
fi
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee "$OUT/gpu.csv"
set -o pipefail
# Two servers side by side on the same GPU: CUDA graphs off (18080) and on (18081, the default).
t0=$(python3 -c 'import time; print(time.time())')
OMNI_MODELS=$EX OMNI_DEVICE=cuda OMNI_CUDA_GRAPHS=0 python3 -m granian --interface asgi \
  --workers 1 --host 127.0.0.1 --port 18080 --log-level warning app.main:app > "$OUT/server-nographs.log" 2>&1 &
A=$!
OMNI_MODELS=$EX OMNI_DEVICE=cuda python3 -m granian --interface asgi \
  --workers 1 --host 127.0.0.1 --port 18081 --log-level warning app.main:app > "$OUT/server.log" 2>&1 &
B=$!
python3 - "$t0" <<'PY' | tee "$OUT/startup.txt" || { tail -30 "$OUT"/server*.log; exit 1; }
import sys, time, json, urllib.request, urllib.error
t0 = float(sys.argv[1])
for port in (18080, 18081):
    deadline = time.time() + 180          # a server that cannot start must not eat the lease
    while True:
        try:
            ready = urllib.request.urlopen("http://127.0.0.1:%d/readyz" % port).read(); break
        except (urllib.error.URLError, ConnectionError):
            if time.time() > deadline:
                sys.exit("server on port %d not ready in 180 s; see its log" % port)
            time.sleep(0.2)
    t_ready = time.time()
    body = json.dumps({"model": "english", "state": "I was charged twice.", "questions": {"refund": {"type": "noul", "instructions": "Refund?"}}}).encode()
    t1 = time.time(); urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%d/v1/systemone" % port, body, {"content-type": "application/json"})).read()
    print("port %d: start-to-ready %.1f s, first request %.1f ms" % (port, t_ready - t0, (time.time() - t1) * 1000))
    open("/tmp/omni-readyz-%d.json" % port, "wb").write(ready)
PY
cp /tmp/omni-readyz-18081.json "$OUT/readyz.json"
nvidia-smi --query-gpu=memory.used --format=csv,noheader | tee "$OUT/gpu_mem_serving.txt"
for round in 1 2; do
  for port in 18080 18081; do
    python3 -m benchmarks.load --url http://127.0.0.1:$port --workload benchmarks/workloads/laya_1q.jsonl \
      --concurrency 1,8,16,64 --out "$OUT/http_1q_${port}_r$round.json" --label "1 question, port $port, round $round"
  done
done
for port in 18080 18081; do
  python3 -m benchmarks.load --url http://127.0.0.1:$port --workload benchmarks/workloads/laya_3q.jsonl \
    --concurrency 1,16 --out "$OUT/http_3q_$port.json" --label "3 questions, port $port"
done
kill $A $B; wait $A $B 2>/dev/null || true
python3 -m benchmarks.inprocess --checkpoint /tmp/omni/ck-english --export $EX \
  --out "$OUT/inprocess.json"
