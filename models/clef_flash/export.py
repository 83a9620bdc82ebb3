"""Clef-Flash export: Qwen3.5-9B backbone + joint schema head → one `clef-joint-v1` ONNX graph.

    python -m models.export clef-flash --checkpoint Cloudflare/clef-flash --out exports/clef-flash \
        [--dtype float16] [--gdn-kernel gated_delta_net_fused] [--records single]

The backbone returns the final-norm hidden state at every position; the head (head_graph.py:
the published head's maths with its per-record loops as masked matrix products, in fp32) reads
them with the BF16 `lm_head` rows of the record's tokens and returns one logit per option
(models.md §5.5 signature; softmax per question on the host). The joint head relates every
question of a request, so records never share a sequence. `records="batched"` (the default) runs
several a pass as rows of one batch (the signature's inputs with a batch axis and
`question_record`, records.py), each read by the head within its own row.

The system turn and `STATE:` line every record starts with are computed once here, in float32,
and baked into the graph (models/qwen35/prefix.py; the head's hidden states too, which the joint
head reads with the rest): the graph takes the ids after them, and the positions and spans of
the whole record.
"""

from __future__ import annotations

import os
import time

from models import gdn_plan as engines
from models import export_dir, hub, precision
from models.clef_flash import FAMILY
from models.clef_flash import gate, head_graph
from models.clef_flash import records as batching
from models.clef_flash.prepare import head_ids
from models.clef_flash.served import RECORDS, TOKEN_POSITIONS
from models.qwen35 import export as qexport
from models.qwen35 import gate as qgate
from models.qwen35 import gdn
from models.qwen35 import bake as qbake
from models.qwen35 import weights
from models.qwen35.dims import TextDims
from models.qwen35.export import load_dtype as _load_dtype

NAME = "clef-flash"
REPO = "Cloudflare/clef-flash"
HEAD_FILES = [head_graph.HEAD_CONFIG, head_graph.HEAD_WEIGHTS, "joint_schema_model.py"]
# `records`: "batched" (served.RECORDS, the default), several records a pass as rows of one batch
# (records.py), so load shares passes; or "single", the published clef-joint-v1 signature
# (records.INPUTS), one record a pass, kept for clients of that signature. `token_positions` is
# always served.TOKEN_POSITIONS.
RECORDS_CHOICES = ("single", RECORDS)


def _example(vocab: int):
    """One padded record (T = 128, 100 real tokens, 3 questions of 2-4 options): clef-joint-v1's
    inputs, to trace the single-record signature at."""
    _, input_ids, positions, q_spans, q_types, o_spans, o_question = head_graph.example_inputs(8, vocab)
    return input_ids, positions, q_spans, q_types, o_spans, o_question


def example_batch(vocab: int, widths=((128, 100, (2, 3, 4)), (128, 90, (3, 2))), seed: int = 0, head: int = 0):
    """Padded records as one batch (the graph's inputs, torch tensors), one per (width, real
    tokens, options per question): by default two of 128 tokens, 100 and 90 real, with 3 and
    2 questions, to trace at. `head`: tokens of a baked prompt head ahead of each (ids after it)."""
    import torch

    rows, positions, spans, types, o_spans, o_question, record = [], [], [], [], [], [], []
    for b, (width, tokens, per_question) in enumerate(widths):
        _, ids, _, qs, qt, os_, oq = head_graph.example_inputs(8, vocab, width, tokens, per_question, seed + b)
        rows.append(ids)
        positions.append(torch.cat([torch.arange(head + tokens), torch.full((width - tokens,), -1)]))
        oq = oq + sum(len(t) for t in types)
        spans, types, o_spans, o_question = spans + [qs + head], types + [qt], o_spans + [os_ + head], o_question + [oq]
        record.append(torch.full((len(qt),), b))
    return (
        torch.cat(rows),
        torch.stack(positions),
        torch.cat(spans),
        torch.cat(types),
        torch.cat(o_spans),
        torch.cat(o_question),
        torch.cat(record),
    )


def export(
    checkpoint: str,
    out: str,
    *,
    revision: str | None = None,
    subfolder: str | None = None,
    name: str | None = None,
    force: bool = False,
    dtype: str = "float32",
    gdn_kernel: str = "linear_attention",
    parity_gate: str = "enforce",
    records: str = RECORDS,
    gdn_plan: str = engines.DEFAULT,
    progress=print,
) -> dict:
    import torch

    progress = progress or (lambda m: None)
    qgate.check_options(dtype, gdn_kernel, parity_gate)
    if records not in RECORDS_CHOICES:
        raise ValueError("records must be one of %s, got %r" % (", ".join(RECORDS_CHOICES), records))
    batched = records == RECORDS
    t0 = time.perf_counter()
    progress("[1/5] resolving checkpoint %s" % checkpoint)
    src = hub.resolve(checkpoint, qexport.BASE_FILES + HEAD_FILES, revision=revision, subfolder=subfolder)
    missing = [n for n in HEAD_FILES[:2] if not os.path.exists(os.path.join(src.path, n))]
    if missing:
        raise ValueError("%s is not a Clef-Flash checkpoint: no %s" % (src.path, ", ".join(missing)))
    served_name = name or NAME
    options = qexport.export_options(
        {"name": served_name, "prompt_head": "baked", "token_positions": TOKEN_POSITIONS, "records": records},
        dtype,
        gdn_kernel,
    )
    progress("[2/5] hashing sources")
    sources = qexport.hash_sources(src.path, qexport.source_files(src.path) + HEAD_FILES, progress)
    if not force and export_dir.up_to_date(out, FAMILY, sources, options, parity_gate):
        return export_dir.reuse(out, progress)

    dims = TextDims.from_dir(src.path)
    progress(
        "[3/5] loading the backbone (%d layers, hidden %d) and the joint head"
        % (len(dims.layer_types), dims.hidden_size)
    )
    backbone = qexport.build_module(
        dims, weights.load_text_state(src.path, _load_dtype(dtype)), "all", dtype, consume=True
    )
    baked = qbake.bake_for_export(backbone, src.path, head_ids, qgate.reference_device(), progress)
    graph = head_graph.compose(backbone, src.path)
    progress("[4/5] exporting (backbone %s, head fp32, GDN kernel %s)" % (dtype, gdn_kernel))
    batch, seq, tokens, questions, opts = (
        torch.export.Dim("batch"),
        torch.export.Dim("seq_len"),
        torch.export.Dim("tokens"),
        torch.export.Dim("questions"),
        torch.export.Dim("options"),
    )
    dynamic = {
        "input_ids": {1: seq},
        "token_positions": {0: tokens},
        "question_spans": {0: questions},
        "question_types": {0: questions},
        "option_spans": {0: opts},
        "option_question": {0: opts},
    }
    if batched:
        dynamic.update(
            input_ids={0: batch, 1: seq}, token_positions={0: batch, 1: tokens}, question_record={0: questions}
        )
    inputs = list(batching.BATCHED_INPUTS if batched else batching.INPUTS)
    info, check = {"gdn_kernel": gdn_kernel, "gdn_dtype": gdn.input_dtype(dtype, gdn_kernel)}, {}
    export_dir.check_fits(graph, "%s export" % dtype, progress)
    with export_dir.staged(out) as tmp:
        head = baked["tokens"]
        example = example_batch(dims.vocab_size, head=head) if batched else _example(dims.vocab_size)
        path = qexport.export_program(graph, example, inputs, ["logits"], dynamic, tmp, gdn_kernel, progress)
        if dtype == "float32" and gdn_kernel == "linear_attention":
            progress("checking ONNX Runtime (CPU) against torch on an untraced record ...")
            info["check_max_abs_logit_diff"] = _check(graph, path, dims.vocab_size, head, batched)
        if dtype != "float32":
            check["parity_gate"] = result = gate.run(
                graph, path, kernel=gdn_kernel, mode=parity_gate, progress=progress, spend=True, gdn_plan=gdn_plan
            )
            progress(precision.summary(result))
        export_dir.copy_present(src.path, qexport.TOKENIZER_FILES, tmp)
    progress("[5/5] writing the manifest")
    import json

    random = export_dir.flagged_random(os.path.join(src.path, "config.json"))
    with open(os.path.join(src.path, head_graph.HEAD_CONFIG), encoding="utf-8") as f:
        head_config = json.load(f)
    meta = {
        "family": FAMILY,
        "name": served_name,
        "aliases": [REPO] if served_name != REPO else [],
        "description": "Clef-Flash: every question of a request answered jointly from one sequence "
        "by the joint schema head on a Qwen3.5-9B backbone",
        "random_weights": random,
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "onnx": qexport.ONNX_NAME,
        "source": {"checkpoint": src.name, "revision": src.revision, "sha256": sources},
        "dims": dims.as_dict(),
        "head": head_config,
        "weights_dtype": dtype,
        "graph": info,
        "check": check,
        "inputs": inputs,
        "outputs": ["logits"],
        "signature": "clef-joint-v1" + ("+records" if batched else ""),
        "export_options": options,
        "prefix": baked,
        "exporter": export_dir.exporter_info(qexport.OPSET),
    }
    export_dir.finalize(out, meta, hash_data=False)
    progress("exported %s to %s in %.1f s" % (served_name, out, time.perf_counter() - t0))
    return meta


def _check(graph, path: str, vocab: int, head: int = 0, batched: bool = True) -> float:
    """ONNX Runtime (CPU) against torch at shapes it was not traced at: a batch of three records,
    or one record for the single-record signature."""
    import numpy as np
    import onnxruntime as ort
    import torch

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    if batched:
        feeds = example_batch(vocab, ((192, 130, (5, 2, 3, 2)), (192, 70, (2, 1)), (192, 192, (3,))), seed=3, head=head)
    else:
        _, ids, pos, qs, qt, os_, oq = head_graph.example_inputs(
            8, vocab, seq=192, tokens=130, options_per_question=(5, 2, 3, 2), seed=3
        )
        feeds = (ids, pos, qs, qt, os_, oq)
    with torch.no_grad():
        want = graph(*feeds).numpy()
    names = batching.BATCHED_INPUTS if batched else batching.INPUTS
    got = session.run(None, dict(zip(names, (t.numpy() for t in feeds), strict=True)))[0]
    worst = float(np.abs(want - got).max())
    if not worst < 1e-3:
        raise RuntimeError("exported graph disagrees with torch: max |Δlogit| = %g" % worst)
    return worst
