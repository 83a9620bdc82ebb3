#!/usr/bin/env bash
# After h.sh (same lease): the baked-head export's one-row and eight-row passes with each
# GatedDeltaNet engine (OMNI_CUDA_GDN_PLAN) and with the kernel's narrow chunk (chunk_size 32, the
# graph's attribute edited into a copy that hard-links the same weights: ONNX Runtime refuses a
# symbolic link out of the model's folder).
R=$1; mkdir -p $R/g; t0=$(date +%s)
trap 'tar -C $R -czf $R/g.tgz g && rm -rf $R/g' EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/g
HEAD=/tmp/omni/ex-cua-s1-gdnf C32=/tmp/omni/ex-cua-s1-c32
rm -rf $C32 && mkdir -p $C32 && for f in $HEAD/*; do ln $f $C32/; done && rm $C32/model.onnx
python3 -c 'import onnx, sys
m = onnx.load(sys.argv[1] + "/model.onnx", load_external_data=False)
for n in m.graph.node:
    if n.op_type == "GatedDeltaNet":
        [n.attribute.remove(a) for a in list(n.attribute) if a.name == "chunk_size"]
        n.attribute.append(onnx.helper.make_attribute("chunk_size", 32))
onnx.save(m, sys.argv[2] + "/model.onnx")' $HEAD $C32
probe() { python3 -m benchmarks.gpu.pass_probe --export $1 --workload benchmarks/workloads/cua_218.jsonl --rows 1,8 \
  --iters 40 --warmup 5 --top 12 --out $OUT/pass-$2.json 2>&1 | grep -v -i warn | tail -2 | sed "s/^/$2 /"; }
for plan in ${PLANS:-chunked_split chunked auto}; do OMNI_CUDA_GDN_PLAN=$plan probe $HEAD $plan; done
probe $C32 c32
probe $HEAD chunked_split-again
echo "g $(( $(date +%s) - t0 )) s"
