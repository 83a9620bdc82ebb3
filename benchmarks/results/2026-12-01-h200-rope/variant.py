"""A copy of a Qwen3.5 export whose GatedDeltaNet nodes are given no initial state (input 6
left empty, the zeros' ConstantOfShape chain pruned): does ONNX Runtime's CUDA kernel take the
absent state as zeros, and what does the fill cost? Weights are linked, not copied.

    python3 variant.py SRC_EXPORT DST_EXPORT
"""
import os
import sys

import onnx

src, dst = sys.argv[1:3]
os.makedirs(dst)
for name in os.listdir(src):
    if name != "model.onnx":
        os.symlink(os.path.join(src, name), os.path.join(dst, name))
model = onnx.load(os.path.join(src, "model.onnx"), load_external_data=False)
graph = model.graph
cut = 0
for node in graph.node:
    if node.op_type == "GatedDeltaNet" and len(node.input) > 6 and node.input[6]:
        node.input[6] = ""
        cut += 1
while True:            # drop nodes nothing reads any more
    read = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
    dead = [n for n in graph.node if not any(o in read for o in n.output if o)]
    if not dead:
        break
    for n in dead:
        graph.node.remove(n)
onnx.save(model, os.path.join(dst, "model.onnx"))
print("%s: %d GatedDeltaNet nodes without an initial state, %d nodes left" % (dst, cut, len(graph.node)))
