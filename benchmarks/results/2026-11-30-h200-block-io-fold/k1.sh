#!/usr/bin/env bash
# Call K1: Clef-Flash 9B, random full-size checkpoint, fp16 export with the fused GDN kernel and
# its parity gate on CUDA (recorded), built detached; then wait for it.
R=$1
bash .ortgpu/5/install.sh >/dev/null 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
KERNELS=gdnf SKIP_WHEELS=1 DETACH=1 bash benchmarks/gpu/qwen_h200.sh prepare clef-flash
WAIT_S=520 TAIL=12 bash benchmarks/gpu/qwen_h200.sh wait clef-flash
