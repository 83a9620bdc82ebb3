"""benchmarks.gpu.gdn_kernel_probe, what can run without a GPU: its one-node graph is the node our
exporter emits for `gated_delta_net_fused` (same attributes, same inputs filled), its inputs have
the served layouts, and its float32 reference is the exported op's own torch maths. (Both
kernels it times, ONNX Runtime's GatedDeltaNet and FLA's Triton one, are CUDA-only.)"""

from __future__ import annotations

import onnx
import pytest
import torch

from benchmarks.gpu import gdn_kernel_probe as probe
from models import onnx_ops
from models.qwen35 import gdn

TINY = {"hk": 2, "dk": 8, "hv": 4, "dv": 8}


def _attrs(node) -> dict:
    return {a.name: (a.s.decode() if a.type == onnx.AttributeProto.STRING else a.i) for a in node.attribute}


def _exported_node(tmp_path) -> onnx.NodeProto:
    """The GatedDeltaNet node torch.onnx writes for one `gated_delta_fused` call, as the exporter does."""

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a_log = torch.nn.Parameter(torch.rand(TINY["hv"]))
            self.dt_bias = torch.nn.Parameter(torch.rand(TINY["hv"]))

        def forward(self, qkv, a, b, state):
            return torch.ops.omni_qwen35.gated_delta_fused(
                qkv, a, b, self.a_log, self.dt_bias, TINY["hk"], TINY["dk"], TINY["hv"], TINY["dv"], state
            )

    x = {k: torch.from_numpy(v) for k, v in probe.inputs(1, 3, TINY).items()}
    with torch.no_grad():
        program = torch.onnx.export(
            Layer(),
            (x["qkv"].float(), x["a"], x["b"], x["state"]),
            dynamo=True,
            verbose=False,
            custom_translation_table={torch.ops.omni_qwen35.gated_delta_fused.default: gdn.fused_translation()},
        )
    path = tmp_path / "layer.onnx"
    program.save(str(path))
    (node,) = [n for n in onnx.load(str(path)).graph.node if n.op_type == "GatedDeltaNet"]
    return node


def test_the_probe_times_the_node_the_exporter_emits(tmp_path):
    model = onnx.load_from_string(probe.graph(TINY))
    onnx_ops.opsets()  # registers the schemas (onnxscript first): the checker checks our nodes too
    onnx.checker.check_model(model)
    # Every input comes from the graph's inputs or an earlier node, in order.
    known = {i.name for i in model.graph.input}
    for n in model.graph.node:
        assert all(i in known for i in n.input if i), (n.op_type, list(n.input))
        known.update(n.output)
    assert "out" in known and [o.name for o in model.graph.output] == ["out"]
    (node,) = [n for n in model.graph.node if n.op_type == "GatedDeltaNet"]
    exported = _exported_node(tmp_path)
    assert node.domain == exported.domain == "com.microsoft"
    assert _attrs(node) == _attrs(exported)
    assert [bool(i) for i in node.input] == [bool(i) for i in exported.input]  # packed q|k|v, no key/value
    assert len(node.output) == 2  # as in a served graph, whose unused outputs are dropped (test_fused)


def test_inputs_have_the_served_layouts_and_the_reference_is_the_ops_maths():
    x = probe.inputs(2, 5, TINY, seed=3)
    width = 2 * TINY["hk"] * TINY["dk"] + TINY["hv"] * TINY["dv"]
    assert x["qkv"].shape == (2, 5, width) and x["qkv"].dtype.name == "float16"
    assert x["a"].shape == x["b"].shape == (2, 5, TINY["hv"])
    assert x["state"].shape == (2, TINY["hv"], TINY["dv"], TINY["dk"])  # V-major, as ONNX Runtime holds it
    t = {k: torch.from_numpy(v) for k, v in x.items()}
    want = gdn.gated_delta_fused(
        t["qkv"].float(),
        t["a"],
        t["b"],
        t["a_log"],
        t["dt_bias"],
        TINY["hk"],
        TINY["dk"],
        TINY["hv"],
        TINY["dv"],
        t["state"],
    )
    assert torch.allclose(torch.from_numpy(probe.reference(x, TINY)), want, atol=1e-6)
    # The state matters: the same tokens from zeros give other outputs.
    zero = dict(x, state=x["state"] * 0)
    assert abs(probe.reference(zero, TINY) - probe.reference(x, TINY)).max() > 1e-3


def test_shapes_and_full_size_heads():
    assert probe.parse_shapes("1x144,16x218") == [(1, 144), (16, 218)]
    assert probe.dims("4b") == {"hk": 16, "dk": 128, "hv": 32, "dv": 128}
    assert probe.dims("27b")["hv"] == 48
    with pytest.raises(KeyError):
        probe.dims("1b")
