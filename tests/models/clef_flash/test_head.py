"""The masked-matmul head (head_graph.ClefJointHead) against the reference `JointSchemaHead` in
torch, on random hidden states: parity, padding, and records that never mix."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.clef_flash.head_graph import ClefJointHead
from models.clef_flash.prepare import prepare_record

from .cases import CASES, body

VOCAB_ROWS = 2048  # random "lm_head" rows (more than the tiny vocab)
ONE = {"refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"}}
THREE = CASES[0][2]
SEVERAL = dict(CASES[-1][2], route=CASES[1][2]["route"], s=CASES[4][2]["s"], spam=CASES[6][2]["spam"])
RECORDS = {"one": ONE, "three": THREE, "several": SEVERAL}


def _inputs(rec, seed: int, hidden_size: int = 64, pad_to: int | None = None, fill=None):
    """(hidden, lexical rows, graph inputs...) for one record; positions past n hold `fill` or noise."""
    g = torch.Generator().manual_seed(seed)
    n = rec.tokens
    hidden = torch.randn(1, n, hidden_size, generator=g)
    table = torch.randn(VOCAB_ROWS, hidden_size, generator=torch.Generator().manual_seed(99))
    lexical = table[torch.from_numpy(rec.input_ids)][None]
    if pad_to:
        t = -(-n // pad_to) * pad_to
        extra = fill if fill is not None else 10 * torch.randn(1, t - n, hidden_size, generator=g)
        hidden = torch.cat([hidden, extra[:, : t - n]], 1)
        lexical = torch.cat([lexical, 10 * torch.randn(1, t - n, hidden_size, generator=g)], 1)
    spans = [
        torch.from_numpy(a) for a in (rec.question_spans, rec.question_types, rec.option_spans, rec.option_question)
    ]
    return hidden, lexical, torch.arange(n), *spans


def _reference(ref, ref_head, rec, hidden, lexical):
    """The reference head on the same record: it reads lm_head rows by id, so give it a table
    whose rows at this record's ids are `lexical`."""
    ids = torch.from_numpy(rec.input_ids)[None]
    table = torch.zeros(VOCAB_ROWS, hidden.shape[-1])
    table[ids[0]] = lexical[0, : rec.tokens]
    encoded = _encoded(ref, rec)
    with torch.no_grad():
        out = ref_head(hidden[:, : rec.tokens], ids, torch.ones_like(ids), [encoded], table)[0]
    return torch.cat(out)


def _encoded(ref, rec):
    questions, start = [], 0
    for i, f in enumerate(rec.fields):
        end = start + len(f.keys)
        questions.append(
            ref.EncodedQuestion(
                f.qid,
                int(rec.question_types[i]),
                tuple(rec.question_spans[i].tolist()),
                tuple(tuple(s) for s in rec.option_spans[start:end].tolist()),
                f.keys,
            )
        )
        start = end
    return ref.EncodedRecord(tuple(rec.input_ids.tolist()), tuple(questions), "r")


def _argmaxes(rec, logits) -> list[int]:
    out, start = [], 0
    for f in rec.fields:
        out.append(int(np.argmax(np.asarray(logits[start : start + len(f.keys)]))))
        start += len(f.keys)
    return out


def test_state_dict_keys_and_shapes_match_the_reference_at_full_size(ref):
    config = {"hidden_size": 4096, "width": 1024, "routing_layers": 2, "layers": 4, "heads": 16, "feedforward": 4096}
    with torch.device("meta"):
        ours, theirs = ClefJointHead(**config).state_dict(), ref.JointSchemaHead(**config).state_dict()
    assert {k: tuple(v.shape) for k, v in ours.items()} == {k: tuple(v.shape) for k, v in theirs.items()}
    # ≈121.8M in BF16: the published 243,538,016-byte file less a ~12 kB safetensors header.
    params = sum(v.numel() for v in ours.values())
    assert params == 121_762_820 and 0 < 243_538_016 - 2 * params < 20_000


def test_logits_spread(head, tok):
    rec = prepare_record(body("x", THREE), tok)
    with torch.no_grad():
        logits = head(*_inputs(rec, 0))
    assert logits.dtype == torch.float32 and logits.shape == (len(rec.option_question),)
    assert float(logits.max() - logits.min()) > 0.5


@pytest.mark.parametrize("which", list(RECORDS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_reference(which, seed, head, ref_head, ref, tok):
    rec = prepare_record(body("I was charged twice; refund me. " * 3, RECORDS[which]), tok)
    inputs = _inputs(rec, seed)
    with torch.no_grad():
        ours = head(*inputs)
    want = _reference(ref, ref_head, rec, inputs[0], inputs[1])
    assert float((ours - want).abs().max()) < 1e-4
    assert _argmaxes(rec, ours.numpy()) == _argmaxes(rec, want.numpy())


@pytest.mark.parametrize("name,state,questions", CASES, ids=[c[0] for c in CASES])
def test_matches_reference_on_every_case(name, state, questions, head, ref_head, ref, tok):
    rec = prepare_record(body(state, questions), tok)
    inputs = _inputs(rec, len(name))
    with torch.no_grad():
        ours = head(*inputs)
    assert float((ours - _reference(ref, ref_head, rec, inputs[0], inputs[1])).abs().max()) < 1e-4


@pytest.mark.parametrize("which", list(RECORDS))
def test_padding_changes_nothing(which, head, tok):
    rec = prepare_record(body("Please refund the duplicate charge.", RECORDS[which]), tok)
    with torch.no_grad():
        plain = head(*_inputs(rec, 5))
        padded = head(*_inputs(rec, 5, pad_to=64))
        t = _inputs(rec, 5, pad_to=64)[0].shape[1]
        broken = head(*_inputs(rec, 5, pad_to=64, fill=torch.full((1, t, 64), float("nan"))))
        # The positions right-padded with -1 to the padded length, as served (served.py).
        hidden, lexical, positions, *spans = _inputs(rec, 5, pad_to=64)
        positions = torch.cat([positions, torch.full((t - rec.tokens,), -1)])
        listed = head(hidden, lexical, positions, *spans)
    assert t % 64 == 0
    assert float((plain - padded).abs().max()) < 1e-5
    assert float((plain - broken).abs().max()) < 1e-5  # even non-finite pad states
    assert torch.equal(listed, padded)


def test_records_never_mix(head, ref_head, ref, tok):
    a = prepare_record(body("Refund the duplicate charge.", THREE), tok)
    b = prepare_record(body({"ticket": "app crashes"}, SEVERAL), tok)
    with torch.no_grad():
        la = head(*_inputs(a, 1))
        lb = head(*_inputs(b, 2))
        again = head(*_inputs(a, 1))
        # A's padding filled with B's hidden states, as if the two were packed back to back.
        packed = head(*_inputs(a, 1, pad_to=64 * 8, fill=_inputs(b, 2)[0]))
    assert torch.equal(la, again)
    assert float((la - packed).abs().max()) < 1e-5
    # The reference, given both records as one padded batch, gives each the same logits.
    ia, ib = _inputs(a, 1), _inputs(b, 2)
    ids_a, ids_b = (torch.from_numpy(r.input_ids) for r in (a, b))
    t = max(a.tokens, b.tokens)
    hidden = torch.zeros(2, t, 64)
    hidden[0, : a.tokens], hidden[1, : b.tokens] = ia[0][0], ib[0][0]
    ids = torch.zeros(2, t, dtype=torch.long)
    ids[0, : a.tokens], ids[1, : b.tokens] = ids_a, ids_b
    mask = (torch.arange(t)[None] < torch.tensor([[a.tokens], [b.tokens]])).long()
    table = torch.zeros(VOCAB_ROWS, 64)
    table[ids_a], table[ids_b] = ia[1][0], ib[1][0]
    if not torch.equal(table[ids_a], ia[1][0]):
        pytest.skip("the two records share a token id with different random rows")
    with torch.no_grad():
        both = ref_head(hidden, ids, mask, [_encoded(ref, a), _encoded(ref, b)], table)
    assert float((torch.cat(both[0]) - la).abs().max()) < 1e-4
    assert float((torch.cat(both[1]) - lb).abs().max()) < 1e-4
