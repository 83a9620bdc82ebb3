"""Laya checkpoint → one ONNX graph (encoder, decision layers, scorer, act head) + manifest.

Export-time only (torch, transformers, onnx). The graph is exported with torch's dynamo exporter
at opset 18 with dynamic batch, sequence and marker dimensions, traced at batch 2 with 3
markers, then checked against torch on shapes it was not traced at before the manifest is
written. `dtype="float16"` runs the encoder and decision layers in fp16 (scorer and act head stay
fp32) and must pass the reduced-precision gate (models.precision) against the fp32 module on
those shapes, on ONNX Runtime's CUDA provider where it has one, or nothing is written.
"""

from __future__ import annotations

import json
import os
import time

from models import export_dir, hub, manifest as manifests, onnx_ops, precision
from models.fold import save_folded
from models.laya import checkpoint as ck
from models.laya.adapter import INPUTS, LayaAdapter
from models.laya.prepare import Row

ONNX_NAME = "model.onnx"
OPSET = 18


def _log(progress, msg: str) -> None:
    if progress:
        progress(msg)


DTYPES = ("float32", "float16")


def _load_graph(path: str, agent_config: dict, encoder_config: dict, attention: str | None = None):
    import torch
    from safetensors.torch import load_file

    from models.laya.graph import LayaDecisionGraph, build_encoder

    model = LayaDecisionGraph(
        build_encoder(encoder_config),
        agent_config["head_layers"],
        len(agent_config.get("act_costs", {})) + 1,
        attention,
    )
    # Published weights are fp16 (the temperature buffer fp32); compute in fp32.
    weights = {k: v.to(torch.float32) for k, v in load_file(os.path.join(path, "model.safetensors")).items()}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    missing = [k for k in missing if k != "temperature"]
    if missing or unexpected:
        raise ValueError(
            "checkpoint does not match Laya's DecisionModel: missing %s, unexpected %s" % (missing[:8], unexpected[:8])
        )
    return model.eval()


def example_batch(vocab: int, batch: int, seq: int, markers: int, seed: int):
    """The graph's inputs (INPUTS) for `batch` random question rows with `markers` options each,
    packed as serving packs them (LayaAdapter.pack): the first row has `seq` tokens, the others
    about half as many, so that two share a batch row; the last has one option fewer (what the
    export traces and checks on)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(batch):
        n = seq if i == 0 else max(2 * markers + 2, seq // 2 - 2 * i)
        ids = torch.randint(10, max(11, min(vocab, 1000)), (n,), generator=g).tolist()
        k = markers - 1 if i == batch - 1 and batch > 1 else markers
        rows.append(Row(ids, list(range(1, 1 + 2 * k, 2)), i % 3))
    feeds = LayaAdapter(0, {}, max_len=max(seq, 16)).pack([rows]).feeds  # `markers` columns (>= 2)
    return tuple(torch.from_numpy(feeds[name]) for name in INPUTS)


def export(
    checkpoint: str,
    out: str,
    *,
    revision: str | None = None,
    subfolder: str | None = None,
    name: str | None = None,
    force: bool = False,
    dtype: str = "float32",
    parity_gate: str = "enforce",
    progress=print,
) -> dict:
    """`parity_gate`: enforce (a half-precision graph that fails its gate against float32 is not
    exported) or record (exported, the failure in the manifest); models.precision."""
    import copy

    import torch

    from models.laya import fused
    from models.laya.graph import half_precision

    if dtype not in DTYPES:
        raise ValueError("Laya exports in %s, not %r" % (" or ".join(DTYPES), dtype))
    precision.check_gate_mode(parity_gate)
    t0 = time.perf_counter()
    _log(progress, "[1/5] resolving checkpoint %s" % checkpoint)
    src = hub.resolve(checkpoint, ck.CHECKPOINT_FILES, revision=revision, subfolder=subfolder)
    with open(os.path.join(src.path, "rl_agent_config.json"), encoding="utf-8") as f:
        agent_config = json.load(f)
    with open(os.path.join(src.path, "encoder", "config.json"), encoding="utf-8") as f:
        encoder_config = json.load(f)
    for key in ("encoder", "head_layers"):
        if key not in agent_config:
            raise ValueError("rl_agent_config.json lacks %r: not a Laya checkpoint" % key)
    if agent_config.get("option_layout", "sequential") != "sequential":
        raise ValueError(
            "option_layout=%r: only the sequential layout exports (laya runs 'parallel' "
            "in torch eager only)" % agent_config["option_layout"]
        )
    variant = ck.infer_variant(src.source if src.repo else src.path, encoder_config)
    served_name = name or variant
    attention = fused.attention_for(encoder_config["hidden_size"] // encoder_config["num_attention_heads"])
    options = {"name": served_name, "opset": OPSET, "dtype": dtype, "attention": attention}
    tok_dir = os.path.join(src.path, "tokenizer")
    source_files = ["rl_agent_config.json", "model.safetensors", "encoder/config.json"] + [
        "tokenizer/" + n for n in ck.TOKENIZER_FILES
    ]
    _log(progress, "[2/5] hashing sources")
    sources = manifests.hash_files(src.path, source_files)
    if not force and export_dir.up_to_date(out, ck.FAMILY, sources, options, parity_gate):
        return export_dir.reuse(out, lambda msg: _log(progress, msg))

    _log(
        progress,
        "[3/5] building the torch graph (%s, %d layers, hidden %d)"
        % (variant, encoder_config.get("num_hidden_layers", 0), encoder_config.get("hidden_size", 0)),
    )
    reference = _load_graph(src.path, agent_config, encoder_config, attention)
    model = reference if dtype == "float32" else half_precision(copy.deepcopy(reference), getattr(torch, dtype))
    vocab = encoder_config.get("vocab_size", 1000)
    # Traced at 3 question rows packed into 2 batch rows: sizes of 1 get baked in, and so would
    # the two dimensions' equality (models.md §2.5).
    example = example_batch(vocab, 3, 48, 3, seed=0)
    batch, seq = torch.export.Dim("batch_rows"), torch.export.Dim("seq_len")
    rows_dim, marks = torch.export.Dim("question_rows"), torch.export.Dim("num_markers")
    tokens = {0: batch, 1: seq}
    dynamic = dict(
        zip(
            INPUTS,
            (tokens, tokens, tokens, tokens, {0: rows_dim}, {0: rows_dim, 1: marks}, {0: rows_dim, 1: marks}),
            strict=True,
        )
    )
    export_dir.check_fits(model, "%s export of %s" % (dtype, served_name), lambda msg: _log(progress, msg))
    with export_dir.staged(out) as tmp:
        _log(progress, "[4/5] exporting ONNX (opset %d, dynamo, attention %s)" % (OPSET, attention))
        with torch.no_grad():
            program = torch.onnx.export(
                model,
                example,
                input_names=list(dynamic),
                output_names=["logits", "act_logits"],
                dynamic_shapes=dynamic,
                dynamo=True,
                opset_version=OPSET,
                external_data=True,
                verbose=False,
                custom_translation_table=fused.translations(),
            )
        save_folded(program, os.path.join(tmp, ONNX_NAME))
        onnx_ops.unname_unused(os.path.join(tmp, ONNX_NAME))
        _log(progress, "[5/5] checking ONNX Runtime against torch (fp32) on untraced shapes")
        max_diff, parity = _check(
            reference, os.path.join(tmp, ONNX_NAME), vocab, gated=dtype != "float32", mode=parity_gate
        )
        export_dir.copy_present(tok_dir, ck.TOKENIZER_FILES, tmp)
    meta = {
        "family": ck.FAMILY,
        "name": served_name,
        "variant": variant,
        "aliases": list(ck.VARIANTS.get(served_name, ())),
        "description": ck.DESCRIPTIONS.get(variant, "Laya decision model"),
        "random_weights": bool(agent_config.get("random_weights")),
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "onnx": ONNX_NAME,
        "source": {
            "checkpoint": src.name,
            "revision": src.revision,
            "path": src.path if not src.repo else None,
            "sha256": sources,
        },
        "dims": {
            k: encoder_config.get(k)
            for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
        },
        "config": {
            "max_len": agent_config.get("max_len", 512),
            "head_max_len": agent_config.get("head_max_len", 192),
            "head_layers": agent_config["head_layers"],
            "n_act": len(agent_config.get("act_costs", {})) + 1,
        },
        "calibration": ck.calibration(agent_config),
        "inputs": list(dynamic),
        "outputs": ["logits", "act_logits"],
        "weights_dtype": dtype,
        "export_options": options,
        "exporter": export_dir.exporter_info(OPSET),
        "check": dict({"max_abs_logit_diff": max_diff}, **({"parity_gate": parity} if parity else {})),
    }
    export_dir.finalize(out, meta)
    gate = "; %s %s" % (dtype, precision.summary(parity)) if parity else ""
    _log(
        progress,
        "exported %s to %s in %.1f s (max |Δlogit| vs torch %.2e%s)"
        % (served_name, out, time.perf_counter() - t0, max_diff, gate),
    )
    return meta


def option_distributions(logits, marker_mask) -> list:
    """Each row's softmax over its own options: masked marker columns are not options."""
    return [precision.softmax(row[keep]) for row, keep in zip(logits, marker_mask, strict=True)]


def _check(model, onnx_path: str, vocab: int, gated: bool = False, mode: str = "enforce") -> tuple[float, dict | None]:
    """Max |Δlogit| of ONNX Runtime against the fp32 torch module on untraced shapes; a float32
    graph must match to 1e-2 on the CPU provider, a half-precision one must pass the parity gate
    over those rows' option distributions instead, on CUDA where ONNX Runtime has it."""
    import numpy as np
    import torch

    session, used, why = precision.gate_session(onnx_path, "auto" if gated else "cpu")
    worst, probs, refs = 0.0, [], []
    for batch, seq, markers in ((1, 16, 2), (3, 80, 4), (8, 120, 5)):
        feeds = example_batch(vocab, batch, seq, markers, seed=batch)
        with torch.no_grad():
            ref = [t.numpy() for t in model(*feeds)]
        got = session.run(None, dict(zip(INPUTS, [t.numpy() for t in feeds], strict=True)))
        for a, b in zip(ref, got, strict=True):
            worst = max(worst, float(np.abs(a - b).max()))
        keep = feeds[INPUTS.index("marker_mask")].numpy()
        probs += option_distributions(got[0], keep)
        refs += option_distributions(ref[0], keep)
    if gated:
        return worst, precision.judge(
            precision.with_cuda_failure(dict(precision.gate_rows(probs, refs), device=used), why), mode
        )
    if not worst < 1e-2:
        raise RuntimeError("exported graph disagrees with torch: max |Δ| = %g" % worst)
    return worst, None
