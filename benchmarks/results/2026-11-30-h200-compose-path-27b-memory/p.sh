#!/usr/bin/env bash
# Call P (same machine, right after N): the float32 Cua-S1 export that export.sh fell back to,
# served with ONNX Runtime's own GatedDeltaNet engine (OMNI_CUDA_GDN_PLAN=auto), c=1 and c=4.
export CUDA_VISIBLE_DEVICES=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD; C=$OUT/p; mkdir -p $C
OMNI_CUDA_GDN_PLAN=auto OMNI_MODELS=/tmp/models/cua-s1-4b-0.2 OMNI_DEVICE=cuda GRANIAN_LOOP=uvloop taskset -c 16-23 \
  python3 -m granian --interface asgi --workers 1 --host 127.0.0.1 --port 18091 --log-level warning app.main:app > $C/server.log 2>&1 &
S=$!
# (a poll of /readyz, up to 120 s)
taskset -c 24-31 python3 -m benchmarks.load --url http://127.0.0.1:18091 --workload benchmarks/workloads/cua_218.jsonl \
  --concurrency 1,4 --requests 200 --out $C/http_cua_218_fp32_auto.json --label "cua fp32 fused, auto engine"
kill $S
