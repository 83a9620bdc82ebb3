#!/usr/bin/env bash
# Call R (one-GPU machine), main at 3ac1d27 or later: a float32 Cua-S1 4B export with the fused
# GatedDeltaNet kernel, served with the default settings (OMNI_CUDA_GDN_PLAN unset, so
# chunked_split configured): the executor should build it with ONNX Runtime's own engine.
R=$1; mkdir -p $R/r; t0=$(date +%s)
bash .ortgpu/5/install.sh > $R/r/ort-install.log 2>&1; tail -1 $R/r/ort-install.log
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
git log --oneline -1 2>/dev/null || true
python3 -m models.qwen35.random_checkpoint /tmp/ck-4b --size 4b > $R/r/ck.log 2>&1
python3 -m models.export cua-s1 --checkpoint /tmp/ck-4b --out /tmp/ex-fp32 --dtype float32 --gdn-kernel gated_delta_net_fused \
  > $R/r/export.log 2>&1; grep -v -i warn $R/r/export.log | tail -2
echo "checkpoint and export $(( $(date +%s) - t0 )) s"
t1=$(python3 -c 'import time; print(time.time())')
OMNI_MODELS=/tmp/ex-fp32 OMNI_DEVICE=cuda GRANIAN_LOOP=uvloop python3 -m granian --interface asgi --workers 1 \
  --host 127.0.0.1 --port 18092 --log-level warning app.main:app > $R/r/server.log 2>&1 &
S=$!
python3 - "$t1" <<'PY'
import sys, time, urllib.request, urllib.error
t0 = float(sys.argv[1]); deadline = time.time() + 120
while True:
    try:
        urllib.request.urlopen("http://127.0.0.1:18092/readyz").read(); break
    except urllib.error.HTTPError as e:
        if time.time() > deadline: sys.exit("not ready in 120 s: %s" % e.read()[:300])
        time.sleep(0.2)
    except (urllib.error.URLError, ConnectionError):
        if time.time() > deadline: sys.exit("not ready in 120 s")
        time.sleep(0.2)
print("start-to-ready %.1f s" % (time.time() - t0))
PY
python3 -m benchmarks.load --url http://127.0.0.1:18092 --workload benchmarks/workloads/cua_218.jsonl \
  --concurrency 1 --requests 200 --out $R/r/http_cua_218_fp32_default.json --label "cua fp32 fused, default settings" | tail -2
kill $S; wait $S 2>/dev/null
grep -v -i warn $R/r/server.log | grep -i -E 'engine|ready|error' | head -5
echo "all $(( $(date +%s) - t0 )) s"
