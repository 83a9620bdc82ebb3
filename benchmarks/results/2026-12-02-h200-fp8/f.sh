#!/usr/bin/env bash
# FP8 products against fp16 on the H200 (clefbatch session). After the ort-gpu-carry calls:
#   f.sh $OUT 4b    # Cua-S1's shapes at one row (144 tokens) and eight (1,152)
#   f.sh $OUT 27b   # Open-Jev-27B's at 1,024 and 2,048 tokens (its noul mix's rows are long)
R=$1; DIMS=$2; mkdir -p $R/f; t0=$(date +%s)
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
if [ ! -d /tmp/ortsite ]; then
  bash .ortgpu/5/install.sh > $R/f/ort-install.log 2>&1; tail -1 $R/f/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
if [ "$DIMS" = 4b ]; then
  ARGS="--rows 144,1152 --copies 8 --forms matmul3d,fp8w,fp8w_a8,gemm8,torch_linear,torch_fp8"
else
  ARGS="--rows 1024,2048 --copies 3 --forms matmul3d,fp8w_a8,gemm8,torch_linear,torch_fp8"
fi
python3 -m benchmarks.gpu.gemm_probe --dims $DIMS $ARGS --iters 20 --out $R/f/gemm-$DIMS.json 2>&1 \
  | grep -v -i "warn" | tee $R/f/gemm-$DIMS.txt | grep -E "predicted|rror|Trace" 
echo "done $(( $(date +%s) - t0 )) s"
