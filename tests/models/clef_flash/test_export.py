"""The standalone head ONNX on ONNX Runtime CPU against the reference head, padded and not; and the
whole pipeline (our prepare → tiny Qwen3.5 backbone → exported head → our finish) against
Cloudflare's `systemone` on the same checkpoint."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from models.clef_flash.finish import finish
from models.clef_flash.head_graph import HEAD_INPUTS, compose, load_lm_head
from models.clef_flash.prepare import prepare_record

from .cases import CASES, body
from .test_head import RECORDS, _argmaxes, _encoded


def _feeds(rec, hidden, pad_id: int, pad_to: int | None = None) -> dict:
    """The head's inputs; with `pad_to`, ids and hidden right-padded to a multiple of it."""
    ids = rec.input_ids
    if pad_to:
        t = -(-rec.tokens // pad_to) * pad_to
        ids = np.concatenate([ids, np.full(t - rec.tokens, pad_id, dtype=np.int64)])
        noise = 10 * np.random.default_rng(7).normal(size=(1, t - rec.tokens, hidden.shape[-1]))
        hidden = np.concatenate([hidden, noise.astype(np.float32)], 1)
    return dict(
        zip(
            HEAD_INPUTS,
            (
                hidden.astype(np.float32),
                ids[None],
                np.arange(rec.tokens, dtype=np.int64),
                rec.question_spans,
                rec.question_types,
                rec.option_spans,
                rec.option_question,
            ),
        )
    )


def _reference_logits(ref, ref_head, clef_dir, rec, hidden) -> np.ndarray:
    ids = torch.from_numpy(rec.input_ids)[None]
    with torch.no_grad():
        out = ref_head(
            torch.from_numpy(hidden), ids, torch.ones_like(ids), [_encoded(ref, rec)], load_lm_head(clef_dir).float()
        )[0]
    return torch.cat(out).numpy()


def _pad_id(tok) -> int:
    return tok.tokenizer.token_to_id("<|endoftext|>")


def test_export_is_checked_and_dynamic(head_onnx):
    import onnx

    info, session = head_onnx
    assert info["max_abs_logit_diff"] < 1e-4
    assert [i.name for i in session.get_inputs()] == HEAD_INPUTS
    assert [o.name for o in session.get_outputs()] == ["logits"]
    model = onnx.load(info["onnx"], load_external_data=False)
    dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    assert isinstance(dims["hidden"][1], str) and dims["hidden"][1] == dims["input_ids"][1]
    assert isinstance(dims["token_positions"][0], str)
    assert isinstance(dims["question_spans"][0], str) and dims["question_spans"][0] == dims["question_types"][0]
    assert isinstance(dims["option_spans"][0], str) and dims["option_spans"][0] == dims["option_question"][0]
    assert dims["hidden"][1] != dims["token_positions"][0]


@pytest.mark.parametrize("which", list(RECORDS))
@pytest.mark.parametrize("pad_to", [None, 64], ids=["unpadded", "padded-64"])
def test_onnx_matches_reference(which, pad_to, head_onnx, ref, ref_head, clef_dir, tok):
    rec = prepare_record(body("I was charged twice; refund me.", RECORDS[which]), tok)
    hidden = np.random.default_rng(len(which)).normal(size=(1, rec.tokens, 64)).astype(np.float32)
    got = head_onnx[1].run(None, _feeds(rec, hidden, _pad_id(tok), pad_to))[0]
    want = _reference_logits(ref, ref_head, clef_dir, rec, hidden)
    assert got.dtype == np.float32 and got.shape == want.shape
    assert float(np.abs(got - want).max()) < 1e-4
    assert _argmaxes(rec, got) == _argmaxes(rec, want)


@pytest.mark.parametrize("name,state,questions", CASES, ids=[c[0] for c in CASES])
def test_padded_equals_unpadded(name, state, questions, head_onnx, tok):
    rec = prepare_record(body(state, questions), tok)
    hidden = np.random.default_rng(1).normal(size=(1, rec.tokens, 64)).astype(np.float32)
    plain = head_onnx[1].run(None, _feeds(rec, hidden, _pad_id(tok)))[0]
    padded = head_onnx[1].run(None, _feeds(rec, hidden, _pad_id(tok), 64))[0]
    assert float(np.abs(plain - padded).max()) < 1e-5


def test_session_runs_never_mix(head_onnx, tok):
    session = head_onnx[1]
    a = prepare_record(body("Refund me.", RECORDS["three"]), tok)
    b = prepare_record(body("The app crashes.", RECORDS["several"]), tok)
    ha = np.random.default_rng(1).normal(size=(1, a.tokens, 64)).astype(np.float32)
    hb = np.random.default_rng(2).normal(size=(1, b.tokens, 64)).astype(np.float32)
    first = session.run(None, _feeds(a, ha, _pad_id(tok), 64))[0]
    session.run(None, _feeds(b, hb, _pad_id(tok), 64))
    assert np.array_equal(first, session.run(None, _feeds(a, ha, _pad_id(tok), 64))[0])


# -- the whole pipeline against Cloudflare's `systemone` ------------------------------------------


@pytest.fixture(scope="module")
def backbone(clef_dir):
    from transformers import Qwen3_5ForConditionalGeneration

    return Qwen3_5ForConditionalGeneration.from_pretrained(clef_dir, dtype=torch.float32).eval()


class _Hidden(torch.nn.Module):
    """input_ids [1,T] -> final-norm hidden [1,T,H]: the contract the lead's backbone fulfils."""

    def __init__(self, model):
        super().__init__()
        self.text = model.model.language_model

    def forward(self, input_ids):
        return self.text(input_ids=input_ids, use_cache=False).last_hidden_state


def _close(got, want, path="") -> None:
    if isinstance(want, dict):
        assert list(got) == list(want), path
        for k in want:
            _close(got[k], want[k], path + "/" + k)
    elif isinstance(want, float):
        assert abs(got - want) <= 2e-4, (path, got, want)  # one 4th-decimal rounding step
    else:
        assert got == want, path


@pytest.mark.parametrize("name,state,questions", CASES, ids=[c[0] for c in CASES])
def test_pipeline_matches_systemone(name, state, questions, backbone, head_onnx, ref, ref_head, hf_tok, tok):
    request = body(state, questions, model="clef-flash-alias")
    want = ref.systemone(ref.ClefModel(backbone, ref_head).eval(), types.SimpleNamespace(tokenizer=hf_tok), request)
    rec = prepare_record(request, tok)
    t = -(-rec.tokens // 64) * 64
    ids = np.concatenate([rec.input_ids, np.full(t - rec.tokens, _pad_id(tok), dtype=np.int64)])
    with torch.no_grad():
        hidden = _Hidden(backbone)(torch.from_numpy(ids)[None]).numpy()
    feeds = dict(_feeds(rec, hidden[:, : rec.tokens], _pad_id(tok)), hidden=hidden, input_ids=ids[None])
    got = finish(rec, head_onnx[1].run(None, feeds)[0], request["model"])
    _close(got, want)
    for qid, answer in want["answers"].items():
        if answer["type"] == "choice":
            assert got["answers"][qid]["choice"] == answer["choice"]


def test_compose_gives_the_clef_joint_signature(backbone, clef_dir, head_onnx, tok):
    graph = compose(_Hidden(backbone), clef_dir)
    rec = prepare_record(body("Refund me.", RECORDS["several"]), tok)
    t = -(-rec.tokens // 64) * 64
    ids = np.concatenate([rec.input_ids, np.full(t - rec.tokens, _pad_id(tok), dtype=np.int64)])
    args = [
        torch.from_numpy(a)
        for a in (
            ids[None],
            np.arange(rec.tokens),
            rec.question_spans,
            rec.question_types,
            rec.option_spans,
            rec.option_question,
        )
    ]
    with torch.no_grad():
        logits = graph(*args)
        hidden = _Hidden(backbone)(args[0]).numpy()
    onnx_logits = head_onnx[1].run(
        None, dict(_feeds(rec, hidden[:, : rec.tokens], _pad_id(tok)), hidden=hidden, input_ids=ids[None])
    )[0]
    assert float(np.abs(logits.numpy() - onnx_logits).max()) < 1e-5


@pytest.mark.slow
def test_a_float16_export_passes_its_parity_gate(clef_dir, tmp_path):
    """The whole clef-joint-v1 graph in fp16 against the float32 backbone read by the same head,
    per question over its own options (models/clef_flash/gate.py); recorded in the manifest."""
    from models import precision
    from models.clef_flash import export, gate
    from models.manifest import read

    out = str(tmp_path / "clef-fp16")
    export.export(clef_dir, out, dtype="float16", progress=None)
    result = read(out)["check"]["parity_gate"]
    assert result["passes"] and result["device"] == "cpu" and result["mode"] == "enforce"
    assert result["rows"] == gate.RECORDS * len(gate.OPTIONS_PER_QUESTION)
    assert 0 < result["max_prob_drift"] <= precision.MAX_DRIFT


def test_the_export_command_takes_records_for_clef_flash_only(clef_dir, tmp_path, capsys):
    """`--records` reaches the Clef-Flash exporter (a bad value is refused before any work) and
    no other family's."""
    import pytest

    from models import export as command

    with pytest.raises(SystemExit) as exit_:
        command.main(["cua-s1", "--checkpoint", clef_dir, "--out", str(tmp_path / "x"), "--records", "batched"])
    assert exit_.value.code == 2 and "--records does not apply to cua-s1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        command.main(["clef-flash", "--checkpoint", clef_dir, "--out", str(tmp_path / "y"), "--records", "many"])
    assert exit_.value.code == 2 and "invalid choice: 'many'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
