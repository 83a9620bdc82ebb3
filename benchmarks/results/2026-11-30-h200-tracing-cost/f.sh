#!/usr/bin/env bash
# Call F (one-GPU machine, the session's last device minutes): a bfloat16 Cua-S1 4B export with the
# fused GatedDeltaNet kernel, gated on CUDA (recorded), then served (the server builds its
# sessions with ONNX Runtime's own engine for bfloat16, models.onnx_ops.gdn_plan_for) and loaded
# at c=1 and c=8 on cua_218. Returns one archive.
R=$1; mkdir -p $R/f
trap 'tar -C $R -czf $R/f.tgz f && rm -rf $R/f' EXIT
trap 'exit 143' TERM
bash .ortgpu/5/install.sh > $R/f/ort-install.log 2>&1; tail -1 $R/f/ort-install.log
export OUT=$R/f
DTYPE=bfloat16 KERNELS=gdnf bash benchmarks/gpu/qwen_h200.sh prepare cua-s1 2>&1 | grep -v -i warn | tail -8
grep -i -E 'gate|drift|exported|error' $OUT/export-cua-s1-gdnf.log | tail -6
INPROCESS=0 HF=0 WORKLOADS=cua_218 CONCURRENCY=1,8 REQUESTS=100 bash benchmarks/gpu/qwen_h200.sh bench cua-s1 2>&1 \
  | grep -v -i warn | tail -12
grep -i -E 'engine|plan|error|fail' $OUT/server-cua-s1.log | head -8
