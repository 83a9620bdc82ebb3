#!/usr/bin/env bash
# A Qwen3.5-backbone GPU session on the device machine, in phases (each one `run` call):
#   bash benchmarks/gpu/qwen_h200.sh prepare cua-s1      # wheels, random 4B, fp16 exports (both GDN kernels)
#   bash benchmarks/gpu/qwen_h200.sh bench cua-s1        # in-process vs HF eager, parity, HTTP c=1/16
# onnxruntime-gpu must already be unpacked in /tmp/ortsite (../shared/tools/ort-gpu-carry), and
# `.whl` carried in the prepare call (benchmarks/gpu/wheels.sh downloads what the machine lacks).
set -euo pipefail
phase=${1:?prepare or bench}
family=${2:?cua-s1, open-jev or clef-flash}
OUT=${OUT:-/tmp/omni-out}
DTYPE=${DTYPE:-float16}
mkdir -p "$OUT" /tmp/omni
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD PYTHONUNBUFFERED=1
case $family in
  cua-s1) size=4b ;;
  open-jev|clef-flash) size=9b ;;
esac
CK=/tmp/omni/ck-$size
EX=/tmp/omni/ex-$family
if [ "$phase" = prepare ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  python3 -c 'import onnxruntime as o, torch, transformers; o.preload_dlls(); print("onnxruntime", o.__version__, o.get_available_providers(), "torch", torch.__version__, "transformers", transformers.__version__)'
  t0=$(date +%s)
  [ -f $CK/config.json ] || python3 -m models.qwen35.random_checkpoint $CK --size $size
  echo "random checkpoint $(( $(date +%s) - t0 )) s"; du -sh $CK
  src=$CK
  if [ "$family" = open-jev ]; then
    python3 -m models.open_jev.random_checkpoint --full $CK /tmp/omni/pkg-9b; src=/tmp/omni/pkg-9b/checkpoint
  fi
  extra=(); [ "$family" = open-jev ] && extra=(--base $CK)
  python3 -m models.export $family --checkpoint $src "${extra[@]}" --out $EX-la --dtype $DTYPE > "$OUT/export-la.log" 2>&1 &
  A=$!
  python3 -m models.export $family --checkpoint $src "${extra[@]}" --out $EX-gdn --dtype $DTYPE --gdn-kernel gated_delta_net > "$OUT/export-gdn.log" 2>&1 &
  B=$!
  wait $A; wait $B
  tail -3 "$OUT"/export-*.log
  echo "build+export $(( $(date +%s) - t0 )) s"; du -sh $EX-la $EX-gdn
  exit 0
fi
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee "$OUT/gpu.csv"
python3 -m benchmarks.gpu.qwen_bench --checkpoint $CK --exports la=$EX-la,gdn=$EX-gdn \
  --out "$OUT/inprocess.json" ${BENCH_ARGS:-} 2>&1 | grep -v Warning | tail -20
best=${BEST:-gdn}
t0=$(python3 -c 'import time; print(time.time())')
OMNI_MODELS=$EX-$best OMNI_DEVICE=cuda python3 -m granian --interface asgi --workers 1 --host 127.0.0.1 \
  --port 18081 --log-level warning app.main:app > "$OUT/server.log" 2>&1 &
S=$!
python3 - "$t0" <<'PY' | tee "$OUT/startup.txt" || { tail -30 "$OUT/server.log"; kill $S; exit 1; }
import sys, time, urllib.request, urllib.error
t0 = float(sys.argv[1]); deadline = time.time() + 240
while True:
    try:
        open("/tmp/omni-readyz.json", "wb").write(urllib.request.urlopen("http://127.0.0.1:18081/readyz").read()); break
    except (urllib.error.URLError, ConnectionError):
        if time.time() > deadline: sys.exit("server not ready in 240 s")
        time.sleep(0.2)
print("start-to-ready %.1f s" % (time.time() - t0))
PY
cp /tmp/omni-readyz.json "$OUT/readyz.json"
nvidia-smi --query-gpu=memory.used --format=csv,noheader | tee "$OUT/gpu_mem_serving.txt"
for w in ${WORKLOADS:?}; do
  python3 -m benchmarks.load --url http://127.0.0.1:18081 --workload benchmarks/workloads/$w.jsonl \
    --concurrency ${CONCURRENCY:-1,16} --requests ${REQUESTS:-200} --out "$OUT/http_$w.json" --label "$w"
done
kill $S; wait $S 2>/dev/null || true
