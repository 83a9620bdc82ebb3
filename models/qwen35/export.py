"""Qwen3.5 text stack → one ONNX graph (prefill only), shared by every family on this backbone.

The family exporters resolve their checkpoint, merge adapters into the text state, then call
`export_graph`. The graph is traced at batch 2 and exported with torch's dynamo exporter, dynamic
in batch and sequence, with the GDN recurrence lowered to an ONNX Runtime kernel (gdn.py).
Weights go to external data next to the graph (`model.onnx.data`), so graphs over 2 GB work.
`check_graph` compares ONNX Runtime (CPU) with the torch module on shapes not traced at.
"""
from __future__ import annotations

import os
import time

from models.qwen35 import gdn
from models.qwen35.dims import TextDims

ONNX_NAME = "model.onnx"
OPSET = 18
DTYPES = ("float32", "float16", "bfloat16")


def build_module(dims: TextDims, state: dict, readout: str, dtype: str = "float32",
                 letter_ids: list[int] | None = None):
    import torch

    from models.qwen35.graph import Backbone

    with torch.device("meta"):
        model = Backbone(dims, readout, letter_ids)
    model = model.to_empty(device="cpu")
    model.load_text_state({k: v.to(getattr(torch, dtype)) if v.is_floating_point() else v
                           for k, v in state.items()})
    # to_empty leaves non-persistent buffers uninitialised: recompute the RoPE frequencies.
    rot = dims.rotary_dim
    model.inv_freq = 1.0 / (dims.rope_theta ** (torch.arange(0, rot, 2).float() / rot))
    return model.eval()


def example_inputs(vocab: int, batch: int, seq: int, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    lengths = torch.tensor([seq - (i * seq) // (batch + 1) for i in range(batch)])
    return ids, lengths - 1


def output_names(readout: str) -> list[str]:
    return {"last": ["hidden"], "letters": ["hidden", "letter_logits"], "all": ["hidden_states"]}[readout]


def export_graph(model, out_dir: str, kernel: str = "linear_attention", extra_inputs: dict | None = None,
                 progress=print) -> str:
    """Write `out_dir/model.onnx` (+ external data) for a built module; returns the path."""
    import torch

    readout = model.readout
    ids, positions = example_inputs(model.d.vocab_size, 2, 70, seed=0)
    batch, seq = torch.export.Dim("batch_size"), torch.export.Dim("seq_len")
    args = (ids,) if readout == "all" else (ids, positions)
    dynamic = {"input_ids": {0: batch, 1: seq}}
    if readout != "all":
        dynamic["positions"] = {0: batch}
    t0 = time.perf_counter()
    progress("exporting ONNX (opset %d, dynamo, GDN kernel %s) ..." % (OPSET, kernel))
    with torch.no_grad():
        program = torch.onnx.export(
            model, args, input_names=list(dynamic), output_names=output_names(readout),
            dynamic_shapes=dynamic, dynamo=True, opset_version=OPSET, external_data=True, verbose=False,
            custom_translation_table={torch.ops.omni_qwen35.gated_delta.default: gdn.translation(kernel)})
    path = os.path.join(out_dir, ONNX_NAME)
    progress("traced and translated in %.1f s; writing %s and its external data ..."
             % (time.perf_counter() - t0, path))
    program.save(path, external_data=True)
    progress("wrote %s (%.1f MB of weights)" % (path, _size(path + ".data") / 1e6))
    return path


def _size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


def check_graph(model, onnx_path: str, tolerance: float = 1e-3) -> float:
    """Max |Δ| between ONNX Runtime (CPU) and torch on two shapes it was not traced at."""
    import numpy as np
    import onnxruntime as ort
    import torch

    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    worst = 0.0
    for batch, seq in ((1, 9), (3, 133)):
        ids, positions = example_inputs(model.d.vocab_size, batch, seq, seed=batch)
        args = (ids,) if model.readout == "all" else (ids, positions)
        with torch.no_grad():
            ref = model(*args)
        ref = [ref] if isinstance(ref, torch.Tensor) else list(ref)
        got = session.run(None, {n: a.numpy() for n, a in zip(names, args)})
        for a, b in zip(ref, got):
            worst = max(worst, float(np.abs(a.float().numpy() - b.astype(np.float32)).max()))
    if not worst < tolerance:
        raise RuntimeError("exported graph disagrees with torch: max |Δ| = %g" % worst)
    return worst
