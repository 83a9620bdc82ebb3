"""What a half-precision graph feeds its GatedDeltaNet kernel (models.qwen35.gdn.input_dtype):
a bfloat16 graph casts the kernel's inputs to float16 (ONNX Runtime's chunked engines take
float16 only) and its output back; the parity gate's reference stays float32."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest
import torch

from models.qwen35 import export, gate, gdn, weights
from models.qwen35.dims import TextDims

FLOAT16, BFLOAT16 = onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16


def test_input_dtype_is_float16_for_bfloat16_graphs_with_the_cuda_kernel():
    for kernel in gdn.CUDA_KERNELS:
        assert gdn.input_dtype("bfloat16", kernel) == "float16"
        assert gdn.input_dtype("float16", kernel) == "float16"
        assert gdn.input_dtype("float32", kernel) == "float32"
    # LinearAttention casts its inputs to float32 itself.
    assert gdn.input_dtype("bfloat16", "linear_attention") == "bfloat16"


def _casts_around_gdn(path: str) -> list[tuple[int | None, int | None]]:
    """(dtype the node's packed input is cast to, dtype its output is cast to) for each
    GatedDeltaNet node, looking through the Reshapes around it (None: no Cast there)."""
    graph = onnx.load(path, load_external_data=False).graph
    producer = {o: n for n in graph.node for o in n.output}
    consumers = collections.defaultdict(list)
    for n in graph.node:
        for i in n.input:
            consumers[i].append(n)

    def to(node):
        if node is None or node.op_type != "Cast":
            return None
        return next(a.i for a in node.attribute if a.name == "to")

    out = []
    for node in (n for n in graph.node if n.op_type == "GatedDeltaNet"):
        before = producer[node.input[0]]
        before = producer.get(before.input[0]) if before.op_type == "Reshape" else before
        after = consumers[node.output[0]][0]
        after = consumers[after.output[0]][0] if after.op_type == "Reshape" else after
        out.append((to(before), to(after)))
    return out


@pytest.fixture(scope="module")
def bf16_module(qwen_tied):
    dims = TextDims.from_dir(qwen_tied)
    return export.build_module(
        dims, weights.load_text_state(qwen_tied, None), "letters", "bfloat16", letter_ids=list(range(32, 58))
    )


@pytest.mark.slow
def test_a_bfloat16_graph_casts_each_gdn_kernel_to_float16_and_back(bf16_module, qwen_tied, tmp_path):
    layers = TextDims.from_dir(qwen_tied).layer_types.count("linear_attention")
    path = export.export_graph(bf16_module, str(tmp_path), "gated_delta_net_fused", progress=lambda m: None)
    assert export.gdn_dtype(bf16_module) == "float16" and export.model_dtype(bf16_module) == "bfloat16"
    assert _casts_around_gdn(path) == [(FLOAT16, BFLOAT16)] * layers


def test_the_cast_keeps_torchs_numbers_and_the_gates_reference_stays_float32(bf16_module, qwen_tied):
    """torch runs the recurrence in float32 either way, so the cast changes only how the kernel's
    bfloat16 inputs and output are rounded on the way (bfloat16 values are exact in float16 in
    its normal range); the gate's float32 reference ignores it."""
    from models.qwen35.graph import GatedDeltaNet

    dims = TextDims.from_dir(qwen_tied)
    layers = [m for m in bf16_module.modules() if isinstance(m, GatedDeltaNet)]
    ids, positions = export.example_inputs(dims.vocab_size, 2, 40, seed=3)
    rows = [np.asarray(ids[:1]), np.asarray(ids[1:, :25])]
    got = {}
    for dtype in (torch.float16, None):
        for m in layers:
            m.gdn_dtype = dtype
        with torch.no_grad():
            got[dtype] = (bf16_module(ids, positions)[0], gate.reference_hidden(bf16_module, rows))
    (cast_out, cast_ref), (plain_out, plain_ref) = got[torch.float16], got[None]
    assert cast_out.dtype == plain_out.dtype == torch.float32  # the readout's float32 hidden
    scale = plain_out.abs().max().item()
    assert (cast_out - plain_out).abs().max().item() <= 0.02 * scale
    for a, b in zip(cast_ref, plain_ref):
        assert np.array_equal(a, b)
