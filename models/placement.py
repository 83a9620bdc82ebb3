"""Which nodes of an exported graph would make ONNX Runtime copy host values into GPU compute,
found from the graph alone (no CUDA needed).

ONNX Runtime computes a graph's shape values (`Shape`, `Size` and the arithmetic on them) on the
CPU. That is free where they reach only inputs a CUDA kernel reads from host memory (a Reshape's
shape, a Range's bounds, an Expand's shape: `HOST_INPUTS`). Where they meet data in an ordinary
input (`question_record * width`), ONNX Runtime runs that arithmetic on the CPU, inserts a
`MemcpyFromHost` and then refuses CUDA-graph capture ("all compute graph nodes have not been
partitioned to the CUDAExecutionProvider"). Every exporter records what this finds in its
manifest (the server names it at load), and the export tests check every family's graph with
`host_arithmetic`, so an export that adds such a node fails them.
"""

from __future__ import annotations

# Inputs a kernel reads from host memory, by op: shape values there stay on the CPU for free.
HOST_INPUTS = {
    "Reshape": {1},
    "Expand": {1},
    "Slice": {1, 2, 3, 4},
    "Range": {0, 1, 2},
    "ConstantOfShape": {0},
    "Unsqueeze": {1},
    "Squeeze": {1},
    "Tile": {1},
    "ReduceSum": {1},
    "ReduceMean": {1},
    "ReduceMax": {1},
    "ReduceMin": {1},
    "Split": {1},
    "Pad": {1, 2, 3},
    "TopK": {1},
    "OneHot": {1},
    "Resize": {1, 2, 3},
    "Trilu": {1},
    "CumSum": {1},
    "GroupQueryAttention": {6},
}


def host_arithmetic(path: str) -> list[dict]:
    """The nodes of the ONNX graph at `path` where a shape value meets data outside the op's host
    inputs: [{"op", "node", "input": index, "value"}], empty for a graph ONNX Runtime can capture
    on this count. Nodes are read in the file's (topological) order; subgraphs are not walked."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    const = {t.name for t in graph.initializer}
    host: set[str] = set()  # shape values: computed on the CPU
    found = []
    for node in graph.node:
        if node.op_type in ("Shape", "Size"):
            host.update(node.output)
            continue
        live = [x for x in node.input if x and x not in const]
        if not live:  # constants only: folded
            const.update(node.output)
            continue
        outside = [(i, x) for i, x in enumerate(node.input) if x in host and i not in HOST_INPUTS.get(node.op_type, ())]
        if all(x in host for x in live):
            if outside:  # arithmetic on shape values alone: on the CPU, still a shape value
                host.update(node.output)
            continue  # shape values only where the kernel reads host memory: on the GPU
        found += [{"op": node.op_type, "node": node.name, "input": i, "value": x} for i, x in outside]
    return found
