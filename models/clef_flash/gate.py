"""The parity gate of a half-precision Clef-Flash export (models/qwen35/gate.py for the backbone).

Clef's graph is the backbone and the joint head together, so the gate runs whole records: random
token rows of 80-400 tokens carrying 4 questions of 2-5 options (after the baked prompt head,
when the export has one: the reference then runs the head too, from scratch). The reference is
the backbone's float32 hidden states (streamed one layer at a time) read by the same head, which
is float32 in the export too; the distributions are each question's softmax over its own options, as served
(finish.question_probabilities).
"""

from __future__ import annotations

import numpy as np

from models import gdn_plan as engines
from models import precision
from models.clef_flash import head_graph, records as batching
from models.qwen35 import export as qexport
from models.qwen35 import gate as qgate

RECORDS = 6
OPTIONS_PER_QUESTION = (5, 2, 3, 2)


def records(vocab: int, n: int = RECORDS, seed: int = 0, head: int = 0) -> list[tuple]:
    """`n` records (the graph's inputs, torch tensors) of 80-400 real tokens after a baked prompt
    head of `head` tokens, no padding: the ids are those after the head, the positions and spans
    the whole record's."""
    import torch

    rng = np.random.default_rng(seed)
    out = []
    for i, t in enumerate(rng.integers(qgate.MIN_TOKENS, qgate.MAX_TOKENS + 1, size=n)):
        _, ids, positions, q_spans, q_types, o_spans, o_question = head_graph.example_inputs(
            8, vocab, seq=int(t), tokens=int(t), options_per_question=OPTIONS_PER_QUESTION, seed=seed + i
        )
        if head:
            positions = torch.arange(head + int(t))
        out.append((ids, positions, q_spans + head, q_types, o_spans + head, o_question))
    return out


def feeds(case: tuple, batched: bool) -> dict:
    """One record's feeds: clef-joint-v1's, or a batch of one for an export of batched records."""
    arrays = [t.numpy() for t in case]
    if not batched:
        return dict(zip(batching.INPUTS, arrays, strict=True))
    arrays[1] = arrays[1][None]
    return dict(zip(batching.BATCHED_INPUTS, arrays + [np.zeros(len(arrays[3]), dtype=np.int64)], strict=True))


def _by_question(logits: np.ndarray, option_question: np.ndarray) -> list[np.ndarray]:
    return [precision.softmax(logits[option_question == q]) for q in np.unique(option_question)]


def run(
    graph,
    onnx_path: str,
    *,
    kernel: str,
    mode: str = "enforce",
    progress=print,
    spend: bool = False,
    gdn_plan: str = engines.DEFAULT,
) -> dict:
    """Gate the export at `onnx_path` of `graph` (head_graph.ClefJointGraph, backbone in half
    precision): the parity measures over every question of every record, where each side ran;
    raises precision.GateFailed under `enforce` when it fails. `spend`: release the backbone's
    weights once its reference has run (qwen35.gate.release); `gdn_plan`: the GatedDeltaNet engine the
    export will be served with (qwen35.gate.session_for)."""
    import torch

    backbone = graph.backbone
    dtype, gdn_in = qexport.model_dtype(backbone), qexport.gdn_dtype(backbone)
    reason = qgate.unavailable(dtype, kernel)
    if reason:
        return qgate.not_run(reason, mode)
    head = list(backbone.prefix_ids)
    cases = records(backbone.d.vocab_size, head=len(head))
    where = qgate.reference_device()
    progress(
        "parity gate: float32 reference on %s (%d records of %d-%d tokens, %d questions each) ..."
        % (
            where,
            len(cases),
            min(c[0].shape[1] for c in cases),
            max(c[0].shape[1] for c in cases),
            len(OPTIONS_PER_QUESTION),
        )
    )
    hidden = qgate.reference_hidden(backbone, [c[0].numpy() for c in cases], where)
    if spend:
        qgate.release(backbone)
    refs = []
    with torch.no_grad():
        for h, case in zip(hidden, cases, strict=True):
            ids = torch.cat([torch.tensor([head], dtype=case[0].dtype), case[0]], 1) if head else case[0]
            logits = graph.head_graph(torch.from_numpy(h).float()[None], ids, *case[1:]).double().numpy()
            refs += _by_question(logits, case[-1].numpy())
    session, used, engine = qgate.session_for(onnx_path, kernel, gdn_in, gdn_plan)
    progress("parity gate: the export on ONNX Runtime (%s) ..." % used)
    probs = []
    batched = "question_record" in {i.name for i in session.get_inputs()}
    for case in cases:
        (logits,) = session.run(["logits"], feeds(case, batched))
        probs += _by_question(np.asarray(logits, dtype=np.float64), case[-1].numpy())
    del session
    result = dict(
        precision.gate_rows(probs, refs),
        device=used,
        reference_device=where,
        prompt_tokens=[int(c[0].shape[1]) for c in cases],
        **engine,
    )
    return precision.judge(result, mode)
