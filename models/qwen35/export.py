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

from models import export_dir, manifest as manifests, onnx_ops, precision
from models.fold import save_folded
from models.qwen35 import fused, gdn
from models.qwen35.dims import TextDims
from models.qwen35.random_checkpoint import DESCRIBED
from models.qwen35.revision import GRAPH_REVISION

ONNX_NAME = "model.onnx"
OPSET = 18
DTYPES = ("float32", "float16", "bfloat16")


def load_dtype(dtype: str):
    """The dtype to read checkpoint tensors in: fp32 for an fp32 graph; otherwise as stored (BF16),
    which halves the host memory a 9B or 27B export needs (adapters still merge in fp32)."""
    import torch

    return torch.float32 if dtype == "float32" else None


def build_module(
    dims: TextDims,
    state: dict,
    readout: str,
    dtype: str = "float32",
    letter_ids: list[int] | None = None,
    attention: str | None = None,
    consume: bool = False,
):
    """The backbone in `dtype` with `state` loaded. `attention`: "sdpa" (traced) or "gqa"
    (GroupQueryAttention); by default the dtype's (fused.attention_for). `consume` empties `state`
    as its tensors are loaded (an exporter that needs the weights only once)."""
    import torch

    from models.qwen35.graph import Backbone

    with torch.device("meta"):
        model = Backbone(dims, readout, letter_ids, attention or fused.attention_for(dtype))
    # Cast while still on meta, then allocate once in the target dtype.
    model = model.to(getattr(torch, dtype)).to_empty(device="cpu")
    model.load_text_state(state, consume=consume)
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


def export_graph(model, out_dir: str, kernel: str = "linear_attention", progress=print) -> str:
    """Write `out_dir/model.onnx` (+ external data) for a built backbone; returns the path."""
    import torch

    from models.qwen35.graph import SharedHead

    readout = model.readout
    ids, positions = example_inputs(model.d.vocab_size, 2, 70, seed=0)
    batch, seq = torch.export.Dim("batch_size"), torch.export.Dim("seq_len")
    args = (ids,) if readout == "all" else (ids, positions)
    dynamic = {"input_ids": {0: batch, 1: seq}}
    if readout != "all":
        dynamic["positions"] = {0: batch}
    if isinstance(model, SharedHead):  # the pass's prompt head first: [1, P]
        args = (example_inputs(model.d.vocab_size, 1, 41, seed=1)[0], *args)
        dynamic = {"head_ids": {1: torch.export.Dim("head_len")}, **dynamic}
    return export_program(model, args, list(dynamic), output_names(readout), dynamic, out_dir, kernel, progress)


def export_program(module, args, input_names, output_names_, dynamic, out_dir: str, kernel: str, progress) -> str:
    """torch.onnx dynamo export of any module holding the backbone, with the GDN ops lowered to
    `kernel`, fed the dtype it reads (gdn.input_dtype)."""
    import torch

    from models.qwen35.graph import GatedDeltaNet

    gdn.check_kernel(kernel)
    for layer in module.modules():  # the fused kernel takes the layer from the conv output on
        if isinstance(layer, GatedDeltaNet):
            layer.fused = kernel == "gated_delta_net_fused"
            dtype = str(layer.out_proj.weight.dtype).replace("torch.", "")
            reads = gdn.input_dtype(dtype, kernel)
            layer.gdn_dtype = getattr(torch, reads) if reads != dtype else None
    t0 = time.perf_counter()
    progress("exporting ONNX (opset %d, dynamo, GDN kernel %s) ..." % (OPSET, kernel))
    with torch.no_grad():
        program = torch.onnx.export(
            module,
            tuple(args),
            input_names=input_names,
            output_names=output_names_,
            dynamic_shapes=dynamic,
            dynamo=True,
            opset_version=OPSET,
            external_data=True,
            verbose=False,
            custom_translation_table={
                torch.ops.omni_qwen35.gated_delta.default: gdn.translation(),
                torch.ops.omni_qwen35.gated_delta_fused.default: gdn.fused_translation(),
                torch.ops.omni_qwen35.gated_delta_state.default: gdn.translation(with_state=True),
                torch.ops.omni_qwen35.gated_delta_fused_state.default: gdn.fused_translation(with_state=True),
                torch.ops.omni_qwen35.causal_conv_silu.default: gdn.conv_translation(),
                **fused.translations(),
            },
        )
    path = os.path.join(out_dir, ONNX_NAME)
    progress("traced and translated in %.1f s" % (time.perf_counter() - t0))
    save_folded(program, path, progress)
    _drop_unused_outputs(path)
    onnx_ops.unname_unused(path)
    progress("wrote %s (%.1f MB of weights)" % (path, _size(path + ".data") / 1e6))
    return path


def _drop_unused_outputs(path: str) -> None:
    """GatedDeltaNet's optional `state_update` output is only produced with a capture capacity;
    naming it anyway makes the node ask for it. Unname it (weights stay where they are)."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    changed = False
    for node in model.graph.node:
        if node.op_type == "GatedDeltaNet" and len(node.output) > 2:
            del node.output[2:]
            changed = True
    if changed:
        onnx.save(model, path)


def _size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


def check_graph(model, onnx_path: str, tolerance: float = 1e-3) -> float:
    """Max |Δ| between ONNX Runtime (CPU) and torch on two shapes it was not traced at."""
    import numpy as np
    import onnxruntime as ort
    import torch

    from models.qwen35.graph import SharedHead

    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    worst = 0.0
    for batch, seq in ((1, 9), (3, 133)):
        ids, positions = example_inputs(model.d.vocab_size, batch, seq, seed=batch)
        args = (ids,) if model.readout == "all" else (ids, positions)
        if isinstance(model, SharedHead):  # a head of another length than traced
            args = (example_inputs(model.d.vocab_size, 1, 3 + seq // 2, seed=seq)[0], *args)
        with torch.no_grad():
            ref = model(*args)
        ref = [ref] if isinstance(ref, torch.Tensor) else list(ref)
        got = session.run(None, {n: a.numpy() for n, a in zip(names, args, strict=True)})
        for a, b in zip(ref, got, strict=True):
            worst = max(worst, float(np.abs(a.float().numpy() - b.astype(np.float32)).max()))
    if not worst < tolerance:
        raise RuntimeError("exported graph disagrees with torch: max |Δ| = %g" % worst)
    return worst


BASE_FILES = [
    "config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "model-*.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def source_files(directory: str) -> list[str]:
    """The files an export reads from a base checkpoint directory (what its manifest hashes)."""
    names = ["config.json", *[n for n in TOKENIZER_FILES if os.path.exists(os.path.join(directory, n))]]
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(os.path.join(directory, DESCRIBED)):  # drawn as it loads: no shards
        names.append(DESCRIBED)
    elif os.path.exists(index):
        import json

        with open(index, encoding="utf-8") as f:
            names += ["model.safetensors.index.json", *sorted(set(json.load(f)["weight_map"].values()))]
    else:
        names.append("model.safetensors")
    return names


def hash_sources(directory: str, names: list[str], progress=print) -> dict[str, str]:
    """SHA-256 per source file; multi-GB shards take a while, so say so."""
    out = {}
    for i, name in enumerate(names):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            if os.path.getsize(path) > 1 << 30:
                progress("hashing %s (%d/%d, %.1f GB)" % (name, i + 1, len(names), os.path.getsize(path) / 1e9))
            out[name] = manifests.sha256_file(path)
    return out


def write_export(
    out: str, model, kernel: str, progress, tokenizer_dir: str, check: bool, gate=None
) -> tuple[dict, dict]:
    """Export `model` into `out` (staged, so a failure leaves no half export), copy the tokenizer,
    and return what the manifest records: about the graph, and its `check` (`parity_gate`, from
    `gate(model, onnx_path) -> dict`, the parity gate of a half-precision graph: gate.run). A gate
    that refuses raises, and nothing is written."""
    from models.qwen35.graph import SharedHead

    info = {
        "gdn_kernel": kernel,
        "gdn_dtype": gdn.input_dtype(model_dtype(model), kernel),
        "attention": getattr(model, "backbone", model).attention,
    }
    if isinstance(model, SharedHead):
        info["shared_head"] = True
    checked = {}
    export_dir.check_fits(model, "%s export" % model_dtype(model), progress)
    with export_dir.staged(out) as tmp:
        path = export_graph(model, tmp, kernel=kernel, progress=progress)
        # ONNX Runtime's CPU provider has the LinearAttention kernel but few fp16/bf16 ones.
        if check and kernel == "linear_attention" and model_dtype(model) == "float32":
            progress("checking ONNX Runtime (CPU) against torch on untraced shapes ...")
            info["check_max_abs_diff"] = check_graph(model, path)
        if gate is not None and model_dtype(model) != "float32":
            checked["parity_gate"] = result = gate(model, path)
            progress(precision.summary(result))
        export_dir.copy_present(tokenizer_dir, TOKENIZER_FILES, tmp)
    return info, checked


def model_dtype(model) -> str:
    """The dtype of a backbone's weights (of a SharedHead's backbone)."""
    return str(getattr(model, "backbone", model).embed_tokens.weight.dtype).replace("torch.", "")


def gdn_dtype(module) -> str:
    """The dtype `module`'s GatedDeltaNet layers read as exported (export_program): the graph's own
    unless they cast to another."""
    from models.qwen35.graph import GatedDeltaNet

    for layer in module.modules():
        if isinstance(layer, GatedDeltaNet) and layer.gdn_dtype is not None:
            return str(layer.gdn_dtype).replace("torch.", "")
    return model_dtype(module)


def export_options(options: dict, dtype: str, kernel: str) -> dict:
    """A family's export options with what every Qwen3.5 export records beside them: the graph
    revision, the attention kernel its dtype gets, "separate" projections (one matrix product per
    part; the up-to-date check compares these options, and export manifests carry the key) and,
    where it is not the graph's, the dtype the GDN kernel reads."""
    options = dict(
        options,
        dtype=dtype,
        gdn_kernel=kernel,
        attention=fused.attention_for(dtype),
        projections="separate",
        opset=OPSET,
        graph_revision=GRAPH_REVISION,
    )
    gdn_in = gdn.input_dtype(dtype, kernel)
    return options if gdn_in == dtype else dict(options, gdn_dtype=gdn_in)
