#!/usr/bin/env bash
# Call F: Cua-S1 4B fp16 exported by main (.base/prev: weight transforms left to ONNX Runtime) and
# by this branch (folded at export), in parallel; then each served by its own code, one after the
# other: start-to-ready and the session's load time.
R=$1; export OUT=/tmp/omni-out/f; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
t0=$(date +%s)
PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD python3 -m models.qwen35.random_checkpoint /tmp/omni/ck-4b --size 4b 2>&1 | tail -1
for e in prev new; do
  code=$PWD; [ $e = prev ] && code=$PWD/.base/prev
  (cd $code && PYTHONPATH=/tmp/ortsite:/tmp/site:$code python3 -m models.export cua-s1 --checkpoint /tmp/omni/ck-4b \
    --out /tmp/omni/ex-cua-s1-$e --dtype float16 --gdn-kernel gated_delta_net_fused --parity-gate record) > $OUT/export-$e.log 2>&1 &
done
wait
for e in prev new; do grep -E "folded|parity gate vs|exported|wrote" $OUT/export-$e.log | sed "s/^/$e: /"; cp /tmp/omni/ex-cua-s1-$e/manifest.json $OUT/manifest-$e.json; done
ls -la /tmp/omni/ex-cua-s1-prev /tmp/omni/ex-cua-s1-new | tee $OUT/files.txt
echo "exports $(( $(date +%s) - t0 )) s"
for e in prev new prev new; do
  code=$PWD; [ $e = prev ] && code=$PWD/.base/prev
  s=$(date +%s.%N)
  (cd $code && PYTHONPATH=/tmp/ortsite:/tmp/site:$code OMNI_MODELS=/tmp/omni/ex-cua-s1-$e OMNI_DEVICE=cuda GRANIAN_LOOP=uvloop exec python3 -m granian \
    --interface asgi --workers 1 --host 127.0.0.1 --port 18090 --log-level warning app.main:app) > $OUT/server-$e-$(date +%s).log 2>&1 &
  S=$!
  python3 - "$s" "$e" <<'PY'
import json, sys, time, urllib.request, urllib.error
t0, label = float(sys.argv[1]), sys.argv[2]
deadline = time.time() + 150
while True:
    try:
        body = urllib.request.urlopen("http://127.0.0.1:18090/readyz").read(); break
    except (urllib.error.URLError, ConnectionError):
        if time.time() > deadline: sys.exit("not ready in 150 s")
        time.sleep(0.2)
m = json.loads(body)["models"][0]
print("%s start-to-ready %.1f s, load %.0f ms, warm-up %.0f ms" % (label, time.time() - t0, m["load_ms"], m["warmup_ms"]))
PY
  nvidia-smi --query-gpu=memory.used --format=csv,noheader
  kill $S; wait $S 2>/dev/null; sleep 1
done 2>&1 | tee $OUT/ready.txt
echo "done $(( $(date +%s) - t0 )) s"
tar czf $R/f.tgz -C $OUT .
