"""Record rendering (models.md §5.2): token ids and spans against Cloudflare's `encode_record`,
rendering and option order, every validation rejection, the hosted limits, and truncation."""

from __future__ import annotations

import json

import pytest

from models.clef_flash.prepare import (
    PREFIX,
    SUFFIX,
    ClefLimits,
    instructions_text,
    prepare_record,
    question_options,
    render,
)
from models.errors import RequestError

from .cases import CASES, body


def _decode(tok, ids) -> str:
    return tok.tokenizer.decode(list(ids), skip_special_tokens=False)


@pytest.mark.parametrize("name,state,questions", CASES, ids=[c[0] for c in CASES])
def test_record_matches_encode_record(name, state, questions, tok, hf_tok, ref):
    request = body(state, questions)
    rec = prepare_record(request, tok)
    want = ref.encode_record(hf_tok, request)
    assert rec.input_ids.tolist() == list(want.input_ids)
    assert [tuple(s) for s in rec.question_spans.tolist()] == [q.question_span for q in want.questions]
    assert [tuple(s) for s in rec.option_spans.tolist()] == [s for q in want.questions for s in q.option_spans]
    assert [f.keys for f in rec.fields] == [q.option_ids for q in want.questions]
    assert rec.question_types.tolist() == [q.question_type for q in want.questions]
    assert rec.option_question.tolist() == [i for i, q in enumerate(want.questions) for _ in q.option_spans]
    assert [f.qid for f in rec.fields] == list(questions)
    assert not rec.truncated and rec.tokens == len(want.input_ids)


@pytest.mark.parametrize("name,state,questions", CASES, ids=[c[0] for c in CASES])
def test_spans_decode_to_the_rendered_text(name, state, questions, tok):
    rec = prepare_record(body(state, questions), tok)
    ids = rec.input_ids.tolist()
    for (start, end), (qid, qdef) in zip(rec.question_spans.tolist(), questions.items()):
        assert _decode(tok, ids[start:end]) == instructions_text(qid, qdef)
    spans = iter(rec.option_spans.tolist())
    for qdef in questions.values():
        for option_id, description in question_options(qdef["type"], qdef.get("criteria")):
            start, end = next(spans)
            obj = (
                {"option_id": option_id}
                if description is None
                else {"option_id": option_id, "description": description}
            )
            assert _decode(tok, ids[start:end]) == render(obj)
    assert _decode(tok, ids).startswith(PREFIX) and _decode(tok, ids).endswith(SUFFIX)


def test_render_is_compact_sorted_python_json():
    assert render('as is {"a": 1}') == 'as is {"a": 1}'
    assert render({"b": 1, "a": [1.0, 1e16, -0.0, 1e-05, None, True]}) == '{"a":[1.0,1e+16,-0.0,1e-05,null,true],"b":1}'
    assert render({"é": 'ü\n\u0001"\\', "Z": 1, "a": 2}) == '{"Z":1,"a":2,"é":"ü\\n\\u0001\\"\\\\"}'
    assert render(12345678901234567890) == "12345678901234567890"
    assert render({"option_id": "billing", "description": "Payments or invoices"}) == (
        '{"description":"Payments or invoices","option_id":"billing"}'
    )


def test_option_order():
    assert question_options("noul", None) == [
        ("true", "The proposition is true or the answer is yes."),
        ("false", "The proposition is false or the answer is no."),
    ]
    assert question_options("noul", {"false": None, "true": "It greets"}) == [("true", "It greets"), ("false", None)]
    # Code-point order of str(key): digits < upper case < "_" < lower case < non-ASCII; "10" < "9".
    crit = {"zeta": 1, "Äpfel": 2, "_x": 3, "9": 4, "10": 5, "Alpha": 6, "alpha": 7}
    assert [k for k, _ in question_options("choice", crit)] == ["10", "9", "Alpha", "_x", "alpha", "zeta", "Äpfel"]
    assert question_options("score", ["lo", {"x": 1}, None]) == [("0", "lo"), ("1", {"x": 1}), ("2", None)]


def test_finish_context_keeps_both_orders(tok):
    rec = prepare_record(
        body(
            "x",
            {
                "c": {"type": "choice", "criteria": {"b": None, "a": None, "C": None}},
                "s": {"type": "score", "criteria": ["lo", {"k": 1}]},
                "n": {"type": "noul"},
            },
        ),
        tok,
    )
    c, s, n = rec.fields
    assert (c.keys, c.request_keys) == (("C", "a", "b"), ("b", "a", "C"))
    assert (s.keys, s.request_keys, s.legend) == (("0", "1"), ("0", "1"), ("lo", {"k": 1}))
    assert (n.keys, n.request_keys) == (("true", "false"), ("true", "false"))
    assert rec.question_types.tolist() == [1, 2, 0]


def test_question_id_is_in_the_prompt(tok):
    a = prepare_record(body("x", {"alpha": {"type": "noul", "instructions": "Same?"}}), tok)
    b = prepare_record(body("x", {"beta": {"type": "noul", "instructions": "Same?"}}), tok)
    assert a.input_ids.tolist() != b.input_ids.tolist()
    assert "ID: alpha\n" in _decode(tok, a.input_ids)


def test_special_token_text_becomes_special_ids(tok):
    rec = prepare_record(body("say <|im_end|> now", {"q": {"type": "noul"}}), tok)
    im_end = tok.tokenizer.token_to_id("<|im_end|>")
    prefix = len(tok.encode(PREFIX))
    state = rec.input_ids[prefix : prefix + rec.state_tokens].tolist()
    assert im_end in state


def test_fragments_are_tokenized_separately(tok):
    """Joining the fragments first would give other ids (the reason for fragment-wise encoding)."""
    rec = prepare_record(body("Hello", {"q": {"type": "noul", "instructions": "Hi"}}), tok)
    assert rec.input_ids.tolist() != tok.encode(_decode(tok, rec.input_ids))


# -- validation: every rejection, its status and code --------------------------------------------


def _reject(tok, request, status, code, limits=None):
    with pytest.raises(RequestError) as info:
        prepare_record(request, tok, limits)
    assert (info.value.status, info.value.code) == (status, code), info.value.detail
    return info.value


Q = {"q": {"type": "noul", "instructions": "Yes?"}}


@pytest.mark.parametrize(
    "request_body",
    [
        {"model": 3, "state": "x", "questions": Q},
        {"model": "clef-flash", "questions": Q},
        {"model": "clef-flash", "state": "x"},
        {"model": "clef-flash", "state": "x", "questions": []},
        {"model": "clef-flash", "state": "x", "questions": {}},
    ],
    ids=["model-not-string", "no-state", "no-questions", "questions-array", "questions-empty"],
)
def test_request_level_rejections(request_body, tok):
    _reject(tok, request_body, 422, "invalid_request")


BAD_QUESTIONS = {
    "not-object": "noul",
    "no-type": {"instructions": "x"},
    "unknown-type": {"type": "rank", "criteria": {"a": 1, "b": 2}},
    "choice-no-criteria": {"type": "choice", "instructions": "x"},
    "choice-empty": {"type": "choice", "criteria": {}},
    "choice-list": {"type": "choice", "criteria": ["a", "b"]},
    "choice-one-option": {"type": "choice", "criteria": {"only": None}},
    "choice-256-options": {"type": "choice", "criteria": {"o%d" % i: None for i in range(256)}},
    "score-no-criteria": {"type": "score"},
    "score-object": {"type": "score", "criteria": {"0": "lo", "1": "hi"}},
    "score-one-level": {"type": "score", "criteria": ["only"]},
    "score-11-levels": {"type": "score", "criteria": ["l%d" % i for i in range(11)]},
    "noul-list": {"type": "noul", "criteria": ["yes", "no"]},
    "noul-unknown-side": {"type": "noul", "criteria": {"True": "yes"}},
    "": {"type": "noul"},  # an empty id, no instructions: an empty question span
}


@pytest.mark.parametrize("qid", list(BAD_QUESTIONS), ids=[k or "empty-id" for k in BAD_QUESTIONS])
def test_question_rejections(qid, tok):
    err = _reject(tok, body("x", {"fine": Q["q"], qid: BAD_QUESTIONS[qid]}), 422, "invalid_question")
    assert [e["question"] for e in err.errors] == [qid]


def test_every_invalid_question_is_listed(tok):
    err = _reject(tok, body("x", {**BAD_QUESTIONS, "fine": Q["q"]}), 422, "invalid_question")
    assert [e["question"] for e in err.errors] == list(BAD_QUESTIONS)
    assert all(e["detail"] for e in err.errors)


def test_limits_at_their_bounds_are_accepted(tok):
    many = {"q%d" % i: {"type": "noul"} for i in range(64)}
    assert len(prepare_record(body("x", many), tok).fields) == 64
    wide = {"c": {"type": "choice", "criteria": {"o%03d" % i: None for i in range(255)}}}
    assert len(prepare_record(body("x", wide), tok).option_spans) == 255
    for n in (2, 10):
        rec = prepare_record(body("x", {"s": {"type": "score", "criteria": ["l"] * n}}), tok)
        assert len(rec.option_spans) == n
    two = body("x", {"c": {"type": "choice", "criteria": {"a": None, "b": None}}})
    assert len(prepare_record(two, tok).option_spans) == 2
    assert ClefLimits().max_length == 16384 and ClefLimits().max_state_tokens == 65536


def test_too_many_questions(tok):
    _reject(tok, body("x", {"q%d" % i: {"type": "noul"} for i in range(65)}), 413, "too_many_questions")


def test_schema_over_max_length(tok):
    wide = {
        "c%d" % j: {"type": "choice", "criteria": {"o%03d" % i: "option %d" % i for i in range(255)}} for j in range(8)
    }
    err = _reject(tok, body("x", wide), 413, "input_too_long")
    assert "16384" in err.detail
    small = ClefLimits(max_length=120)
    _reject(tok, body("x", {"q": {"type": "noul", "instructions": "word " * 60}}), 413, "input_too_long", small)


def test_hopeless_schema_is_refused_before_tokenizing(tok, monkeypatch):
    wide = {"c%d" % j: {"type": "choice", "criteria": {"o%03d" % i: None for i in range(255)}} for j in range(64)}
    monkeypatch.setattr(tok, "encode_batch", None)  # would fail if called
    err = _reject(tok, body("x", wide), 413, "input_too_long")
    assert "at least" in err.detail


def test_state_over_its_token_limit(tok):
    limits = ClefLimits(max_state_tokens=50)
    _reject(tok, body("word " * 200, Q), 413, "input_too_long", limits)
    assert prepare_record(body("word " * 10, Q), tok, limits).state_tokens <= 50


def test_huge_state_is_refused_without_tokenizing_it(tok, monkeypatch):
    calls = []
    encode, encode_batch = tok.encode, tok.encode_batch
    monkeypatch.setattr(tok, "encode", lambda text: calls.append(len(text)) or encode(text))
    monkeypatch.setattr(tok, "encode_batch", lambda texts: calls.extend(map(len, texts)) or encode_batch(texts))
    tok._shared.clear()  # the fragments are tokenized here, not taken from the cache
    longest = max(len(t.encode()) for t in tok.tokenizer.get_vocab(with_added_tokens=True))
    _reject(tok, body("word " * (65_536 * longest // 2), Q), 413, "input_too_long")
    assert calls and max(calls) < 1000  # fragments only, never the megabytes of state


def test_state_exactly_at_its_token_limit_is_accepted(tok):
    """The shortcut never refuses what fits: a state of the longest token repeated k times."""
    vocab = tok.tokenizer.get_vocab()
    longest = max((t for t in vocab if not t.startswith("<")), key=len)
    text = tok.tokenizer.decode([vocab[longest]])
    k = 40
    assert len(tok.encode(text * k)) <= k
    rec = prepare_record(body(text * k, Q), tok, ClefLimits(max_state_tokens=len(tok.encode(text * k))))
    assert rec.state_tokens == len(tok.encode(text * k))


# -- truncation: the state is cut to fit, and the cut is reported ---------------------------------


@pytest.mark.parametrize(
    "state",
    ["The customer wrote again about invoice %d. " * 40, [{"turn": i, "text": "again and again"} for i in range(40)]],
    ids=["string", "array"],
)
def test_truncation_matches_upstream_and_is_reported(state, tok, hf_tok, ref):
    questions = CASES[0][2]
    full = prepare_record(body(state, questions), tok)
    limit = full.tokens - 37
    rec = prepare_record(body(state, questions), tok, ClefLimits(max_length=limit))
    want = ref.encode_record(hf_tok, body(state, questions), max_length=limit)
    assert rec.input_ids.tolist() == list(want.input_ids) and rec.tokens == limit
    assert [tuple(s) for s in rec.option_spans.tolist()] == [s for q in want.questions for s in q.option_spans]
    assert rec.truncated and rec.state_tokens == full.state_tokens
    assert (rec.state_tokens_dropped, rec.state_tokens_kept) == (37, full.state_tokens - 37)
    # The kept state is the head of the full one (upstream cuts the end).
    prefix = len(tok.encode(PREFIX))
    assert rec.input_ids[prefix : prefix + rec.state_tokens_kept].tolist() == (
        full.input_ids[prefix : prefix + rec.state_tokens_kept].tolist()
    )


def test_schema_exactly_filling_max_length_keeps_no_state(tok):
    full = prepare_record(body("some state words", Q), tok)
    fixed = full.tokens - full.state_tokens
    rec = prepare_record(body("some state words", Q), tok, ClefLimits(max_length=fixed))
    assert rec.state_tokens_kept == 0 and rec.tokens == fixed and rec.truncated
    _reject(tok, body("some state words", Q), 413, "input_too_long", ClefLimits(max_length=fixed - 1))


def test_request_json_roundtrip_is_what_counts(tok):
    """Bodies arrive parsed from JSON: `1E5` is the float 100000.0 and renders as such."""
    parsed = json.loads('{"model":"m","state":{"n":1E5},"questions":{"q":{"type":"noul"}}}')
    rec = prepare_record(parsed, tok)
    assert '{"n":100000.0}' in _decode(tok, rec.input_ids)
