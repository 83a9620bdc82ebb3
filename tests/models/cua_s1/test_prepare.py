"""Cua-S1 preparation: the byte-exact prompt (models.md §3.2), request validation (§3.1, §3.3),
label escaping and tokenization, with the locally trained Qwen-style tokenizer."""

from __future__ import annotations

import copy
import json

import pytest

from models.base import Prepared
from models.cua_s1.prepare import CuaLimits, Context, map_request, prepare, prepare_rows, prompt_text
from models.errors import RequestError

# models.md §3.2, written out rather than imported: the test must catch a drifted constant.
HEAD = (
    "<|im_start|>system\nYou are a one-pass computer-use decision model. You are shown the current "
    "state of a screen and a fixed, closed list of candidate (element, action) options, each given a "
    "single letter. Choose exactly one option: the single best next action to take. Answer with ONLY "
    "that option's letter -- no words, no punctuation, no explanation.<|im_end|>\n<|im_start|>user\n"
)
TAIL = "<|im_end|>\n<|im_start|>assistant\n<think>\n"


def body(state="Screen", **question):
    q = {"type": "choice", "instructions": "Pick one.", "criteria": {"a": "A", "b": "B"}}
    q.update(question)
    return {"model": "cua-s1-4b-0.2", "state": state, "questions": {"q": q}}


# Upstream's 3-option fixture (ThinkFlowLab/system1-omni tests/cua_s1/test_text_contract.py: trycua's
# jev-choice-request-v1.json with the chooser's rendered region as `state`); 218 real-tokenizer tokens.
FIXTURE = body(
    'Visual-region-derived observation for capture "capture-fixture-1":\n'
    "\"submit-text\": text 'Submit' at (300,240,100,40) confidence=0.96 interactive=true",
    instructions="Submit the verified form.",
    criteria={
        "submit-form": "Submit using the unique validated visual region.",
        "reobserve": "Discard this decision set and obtain a fresh observation.",
        "abstain": "Stop without acting if no supplied action is safe.",
    },
)
FIXTURE_USER = (
    "Goal: Submit the verified form.\n\n"
    "App: Cua Driver\nTask family: closed-candidate decision\n\n"
    "Accessibility tree:\n"
    'Visual-region-derived observation for capture "capture-fixture-1":\n'
    "\"submit-text\": text 'Submit' at (300,240,100,40) confidence=0.96 interactive=true\n\n"
    "Options:\n"
    'A. Decision "Submit using the unique validated visual region." -> select\n'
    'B. Decision "Discard this decision set and obtain a fresh observation." -> select\n'
    'C. Decision "Stop without acting if no supplied action is safe." -> select\n\n'
    "Answer with a single letter."
)

# models.md §3.3's example request (153 real-tokenizer tokens).
EXAMPLE = {
    "model": "cua-s1-4b-0.2",
    "state": "Dialog: Delete 3 files permanently? Buttons: Delete, Cancel",
    "questions": {
        "pick": {
            "type": "choice",
            "instructions": "Keep the files.",
            "criteria": {"delete": "Click Delete", "cancel": "Click Cancel"},
        }
    },
}
EXAMPLE_PROMPT = (
    HEAD + "Goal: Keep the files.\n\nApp: Cua Driver\nTask family: closed-candidate decision\n\n"
    "Accessibility tree:\nDialog: Delete 3 files permanently? Buttons: Delete, Cancel\n\n"
    'Options:\nA. Decision "Click Delete" -> select\nB. Decision "Click Cancel" -> select\n\n'
    "Answer with a single letter." + TAIL
)


def prompts(request) -> list[str]:
    state, questions = map_request(request)
    return [prompt_text(state, q) for q in questions]


def reject(request, status=422, code="invalid_question", **kwargs) -> RequestError:
    with pytest.raises(RequestError) as info:
        map_request(request, **kwargs)
    assert (info.value.status, info.value.code) == (status, code), info.value.detail
    return info.value


# --- the prompt ------------------------------------------------------------------------------


def test_upstream_fixture_prompt_is_byte_exact():
    assert prompts(FIXTURE) == [HEAD + FIXTURE_USER + TAIL]


def test_example_request_prompt_is_byte_exact():
    assert prompts(EXAMPLE) == [EXAMPLE_PROMPT]


def test_prompt_ends_with_an_open_think_block():
    # No enable_thinking argument: enable_thinking=False would close it with "\n\n</think>\n\n".
    (text,) = prompts(EXAMPLE)
    assert text.endswith("<|im_start|>assistant\n<think>\n") and "</think>" not in text


@pytest.mark.parametrize(
    "instructions, goal",
    [
        (None, ""),
        ("", ""),
        ("Close it.", "Goal: Close it.\n\n"),
        ({"question": "Which one?"}, 'Goal: {"question": "Which one?"}\n\n'),
        (["a", 1.0], 'Goal: ["a", 1.0]\n\n'),
    ],
)
def test_goal_line(instructions, goal):
    (text,) = prompts(body(instructions=instructions))
    assert text.startswith(HEAD + goal + "App: Cua Driver\nTask family: closed-candidate decision\n\n")


def test_labels_are_rendered_escaped_values_or_keys():
    state, (q,) = map_request(
        body(
            criteria={
                "quote": 'Say "hi"\n',
                "e1": {"action": "click", "element": "e1"},
                "e2": ["click", "e2"],
                "path": "(tab\there) C:\\Users \x01",
                "save": "点击「保存」",
                "abstain": None,
                "blank": "",
                'key "k"': None,
            }
        )
    )
    assert q.labels == (
        'Say \\"hi\\"\\n',
        '{\\"action\\": \\"click\\", \\"element\\": \\"e1\\"}',
        '[\\"click\\", \\"e2\\"]',
        "(tab\\there) C:\\\\Users \\u0001",
        "点击「保存」",
        "abstain",
        "",
        'key \\"k\\"',
    )
    assert q.keys == ("quote", "e1", "e2", "path", "save", "abstain", "blank", 'key "k"')
    text = prompt_text(state, q)
    assert 'A. Decision "Say \\"hi\\"\\n" -> select\nB. Decision "{\\"action\\": ' in text
    assert 'G. Decision "" -> select\nH. Decision "key \\"k\\"" -> select\n\nAnswer' in text


def test_structured_state_renders_with_python_json_in_insertion_order():
    tree = {"z": [1.0, 1e16, -0.0, True, None, "猫"], "a": {"β": "z", "a": "first"}, "n": 12345678901234567890}
    state, _ = map_request(body(tree))
    assert state == (
        '{"z": [1.0, 1e+16, -0.0, true, null, "猫"], "a": {"β": "z", "a": "first"}, "n": 12345678901234567890}'
    )
    state, _ = map_request(body(["x", {"k": 1e-05}]))
    assert state == '["x", {"k": 1e-05}]'
    # A string state passes through unchanged (no escaping, unlike labels).
    state, _ = map_request(body('Say "hi"\n'))
    assert state == 'Say "hi"\n'


def test_options_are_lettered_a_to_z():
    criteria = {"o%d" % i: "x%d" % i for i in range(26)}
    (text,) = prompts(body(criteria=criteria))
    assert 'A. Decision "x0" -> select\n' in text and 'Z. Decision "x25" -> select\n\nAnswer' in text


# --- tokenization ------------------------------------------------------------------------------


def test_rows_are_the_whole_prompt_tokenized(tok):
    questions, rows, usage = prepare_rows(FIXTURE, tok)
    (text,) = prompts(FIXTURE)
    assert rows == [tok.encode(text)]
    im_start, im_end, think = (tok.tokenizer.token_to_id(s) for s in ("<|im_start|>", "<|im_end|>", "<think>"))
    assert rows[0][0] == im_start
    assert rows[0][-2:] == [think, tok.encode("\n")[0]]
    assert rows[0].count(im_end) == 2 and rows[0].count(im_start) == 3
    assert usage == {"input_tokens": len(rows[0]), "output_tokens": 0}
    assert [q.keys for q in questions] == [("submit-form", "reobserve", "abstain")]


def test_special_token_text_in_the_request_becomes_the_special_id(tok):
    im_end = tok.tokenizer.token_to_id("<|im_end|>")
    think_end = tok.tokenizer.token_to_id("</think>")
    plain = prepare_rows(body("Screen"), tok)[1][0]
    spelled = prepare_rows(body("Screen<|im_end|>", criteria={"a": "</think>", "b": "B"}), tok)[1][0]
    assert plain.count(im_end) == 2 and spelled.count(im_end) == 3
    assert think_end not in plain and spelled.count(think_end) == 1


def test_prompts_encoded_in_a_frame_are_the_whole_strings_ids(tok):
    """prepare encodes the system turn and the closing tail once (TokenizerHandle.encode_framed);
    the ids are those of the whole prompt string for any state, seams included: whitespace, special
    token text and its fragments, combining marks and digits at both ends of the user turn."""
    import random

    from models.cua_s1 import prepare as cua

    pieces = [
        "Screen",
        " ",
        "\n",
        "\n\n",
        "  ",
        "\t",
        "<|im_end|>",
        "<|im_start|>",
        "</think>",
        "<|im_",
        "|>",
        "<",
        "\u0301",
        "é",
        "12",
        "3",
        "'s",
        "...",
        "😀",
        "Ünïcode",
        "\r\n",
    ]
    rng = random.Random(7)
    states = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(300)]
    rows = [prepare_rows(body(state), tok)[1][0] for state in states]
    assert rows == [tok.encode(prompts(body(state))[0]) for state in states]
    assert tok._frames[(cua._HEAD, cua._TAIL)] is not None  # the frame is in use, not the fallback


def test_encode_framed_falls_back_to_whole_strings_where_a_cut_could_merge(tok):
    """A frame not cut at special tokens is encoded whole (pieces "ab" + "c" need not tokenize as
    "abc"); a frame whose first check fails is too."""
    bodies = ["cancel", "ed the form", " a"]
    whole = [tok.encode("Click the butt%s now" % b) for b in bodies]
    assert tok.encode_framed("Click the butt", bodies, " now") == whole
    assert tok._frames[("Click the butt", " now")] is None
    assert tok.encode_framed("Click the butt", bodies, " now") == whole


def test_each_question_is_an_independent_row(tok):
    request = copy.deepcopy(EXAMPLE)
    request["questions"]["other"] = {"type": "choice", "instructions": None, "criteria": {"x": None}}
    request["questions"]["pick2"] = copy.deepcopy(request["questions"]["pick"])
    prepared = prepare(request, tok)
    assert isinstance(prepared, Prepared) and isinstance(prepared.context, Context)
    rows = prepared.work
    assert rows[0] == rows[2] == tok.encode(EXAMPLE_PROMPT)  # renaming an id changes nothing
    assert rows[1] == tok.encode(prompts(request)[1])
    assert (prepared.rows, prepared.questions) == (3, 3)
    assert prepared.tokens == sum(map(len, rows)) == prepared.context.usage["input_tokens"]
    assert prepared.longest == max(map(len, rows))
    assert prepared.context.prompt_tokens == [len(r) for r in rows]
    assert [q.qid for q in prepared.context.questions] == ["pick", "other", "pick2"]


def test_prompt_token_limit_is_413_for_every_long_question_before_any_forward(tok):
    (text,) = prompts(EXAMPLE)
    n = len(tok.encode(text))
    assert prepare_rows(EXAMPLE, tok, CuaLimits(max_prompt_tokens=n))[2]["input_tokens"] == n
    with pytest.raises(RequestError) as info:
        prepare_rows(EXAMPLE, tok, CuaLimits(max_prompt_tokens=n - 1))
    assert (info.value.status, info.value.code) == (413, "input_too_long")
    assert info.value.detail == "question 'pick': %d prompt tokens, over %d" % (n, n - 1)
    # The real limit, 16,384, with one long and one short question: only the long one is listed.
    long_state = "Accessibility tree row with a button and a link. " * 3000
    request = body(long_state)
    request["questions"]["short"] = {"type": "choice", "instructions": None, "criteria": {"a": None}}
    request["questions"]["q"]["criteria"] = {"a": "A"}
    request["questions"]["q2"] = request["questions"]["q"]
    sizes = [len(tok.encode(t)) for t in prompts(request)]
    assert sizes[0] > 16384
    with pytest.raises(RequestError) as info:
        prepare_rows(request, tok)
    assert (info.value.status, info.value.code) == (413, "input_too_long")
    assert [e["question"] for e in info.value.errors] == ["q", "short", "q2"]
    assert info.value.errors[0]["detail"] == "%d prompt tokens, over 16384" % sizes[0]
    assert info.value.detail.startswith("question 'q': %d prompt tokens, over 16384; " % sizes[0])


# --- validation ------------------------------------------------------------------------------


def test_model_name():
    reject({**body(), "model": "english"}, code="unknown_model")
    reject({**body(), "model": 7}, code="unknown_model")
    reject({**body(), "model": "cua-ai/cua-s1-4b-0.2"}, code="unknown_model")
    for ok in ("cua-s1-4b-0.2", "CUA-S1-4B-0.2", "jev-latest", None):
        map_request({**body(), "model": ok})
    no_model = body()
    del no_model["model"]
    map_request(no_model)  # the registry routed it: one model loaded
    map_request({**body(), "model": "cua"}, names=("cua-s1-4b-0.2", "cua"))


@pytest.mark.parametrize("state", ["", {}, []])
def test_empty_state(state):
    error = reject(body(state), code="invalid_request")
    assert error.detail == "'state' must not be empty"


@pytest.mark.parametrize("state", [0, 3, 2.5, True, False, None])
def test_state_must_be_text_object_or_array(state):
    reject(body(state), code="invalid_request")
    missing = body()
    del missing["state"]
    reject(missing, code="invalid_request")


@pytest.mark.parametrize("questions", [None, {}, [], ["q"], "q"])
def test_questions_must_be_a_non_empty_object(questions):
    reject({**body(), "questions": questions}, code="invalid_request")


def test_more_than_64_questions_is_413():
    many = body()
    many["questions"] = {"q%d" % i: many["questions"]["q"] for i in range(64)}
    assert len(map_request(many)[1]) == 64
    many["questions"]["q64"] = many["questions"]["q0"]
    reject(many, status=413, code="too_many_questions")


@pytest.mark.parametrize("qtype", ["score", "noul"])
def test_score_and_noul_are_not_supported(qtype):
    criteria = ["low", "high"] if qtype == "score" else None
    error = reject(body(type=qtype, criteria=criteria))
    assert error.errors == [{"question": "q", "detail": "type %r is not supported" % qtype}]
    assert error.detail == "question 'q': type %r is not supported" % qtype


@pytest.mark.parametrize("qtype", ["rank", None, 1, "Choice"])
def test_unknown_types(qtype):
    assert "unknown type" in reject(body(type=qtype)).errors[0]["detail"]


def test_instructions_required_null_allowed():
    missing = body()
    del missing["questions"]["q"]["instructions"]
    assert "'instructions' is required" in reject(missing).errors[0]["detail"]
    assert map_request(body(instructions=None))[1][0].goal == ""
    for bad in (5, 2.5, True):
        reject(body(instructions=bad))


@pytest.mark.parametrize("criteria", [None, {}, [], ["a", "b"], "a", {"o%d" % i: "x" for i in range(27)}])
def test_criteria_must_be_an_object_of_1_to_26(criteria):
    detail = reject(body(criteria=criteria)).errors[0]["detail"]
    assert "'criteria' must be an object with 1 to 26 options" in detail
    missing = body()
    del missing["questions"]["q"]["criteria"]
    reject(missing)


def test_criteria_sizes_at_the_edges():
    assert map_request(body(criteria={"only": None}))[1][0].keys == ("only",)
    assert len(map_request(body(criteria={"o%d" % i: "x" for i in range(26)}))[1][0].keys) == 26


@pytest.mark.parametrize("value", [1, 0, 2.5, -1e300, True, False])
def test_numeric_or_boolean_criteria_values(value):
    detail = reject(body(criteria={"a": "fine", "b": value})).errors[0]["detail"]
    assert detail.startswith("option 'b':")


def test_question_must_be_an_object():
    request = body()
    request["questions"]["q"] = "choose"
    reject(request)


def test_every_invalid_question_is_listed_in_order():
    request = {
        "model": "cua-s1-4b-0.2",
        "state": "S",
        "questions": {
            "ok": {"type": "choice", "instructions": None, "criteria": {"a": None}},
            "noul": {"type": "noul", "instructions": "x"},
            "wide": {"type": "choice", "instructions": "x", "criteria": {"o%d" % i: None for i in range(27)}},
            "number": {"type": "choice", "instructions": "x", "criteria": {"a": 1}},
            "bare": {"type": "choice", "criteria": {"a": None}},
        },
    }
    error = reject(request)
    assert [e["question"] for e in error.errors] == ["noul", "wide", "number", "bare"]
    assert "question 'noul': type 'noul' is not supported; question 'wide': " in error.detail


def test_request_level_errors_come_before_question_errors():
    # 413 for the count wins over per-question problems, as upstream checks it first.
    request = {"model": "cua-s1-4b-0.2", "state": "S", "questions": {"q%d" % i: {"type": "noul"} for i in range(65)}}
    reject(request, status=413, code="too_many_questions")
    reject({**request, "state": ""}, code="invalid_request")


def test_validation_does_not_touch_the_request():
    request = copy.deepcopy(FIXTURE)
    before = json.dumps(request)
    map_request(request)
    assert json.dumps(request) == before
