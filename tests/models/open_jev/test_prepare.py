"""Open-Jev preparation: rendering, prompts, every rejection with its status and code, limits,
candidate counting, chat wrapping with the tiny Qwen-style tokenizer, and max_length."""

from __future__ import annotations

import json

import pytest

from models.errors import RequestError
from models.open_jev.checkpoint import CHAT_PREFIX, CHAT_SUFFIX
from models.open_jev.prepare import LIMITS, compile_request, prepare, prompts, render_value, wrap
from tests.models.open_jev.conftest import make_export

CHOICE_TAIL = "\nIs this proposed answer correct? Answer Yes or No."
NOUL_TAIL = "\nIs the answer to this question yes? Answer Yes or No."


def body(questions, **extra):
    return {"state": "x", "questions": questions, **extra}


def noul(instructions="Is it?", **extra):
    return {"type": "noul", "instructions": instructions, **extra}


def rejected(request, status, code, export=None):
    export = export or make_export("27b-v1.1")
    with pytest.raises(RequestError) as info:
        compile_request(request, export.variant)
    assert (info.value.status, info.value.code) == (status, code), info.value.detail
    return info.value


# --- rendering (models.md §1.2) -------------------------------------------------------------


@pytest.mark.parametrize(
    "value,text",
    [
        (1e16, "1e+16"),
        (-0.0, "-0.0"),
        (1e-05, "1e-05"),
        (1.0, "1.0"),
        (json.loads("1E5"), "100000.0"),
        (12345678901234567890123, "12345678901234567890123"),
        (True, "true"),
        (None, "null"),
        ('猫 "quoted" {"a": 1}', '猫 "quoted" {"a": 1}'),  # strings pass through unchanged
        (["猫", 'a"b\\c', "\n\t\x01"], '["猫", "a\\"b\\\\c", "\\n\\t\\u0001"]'),
        ({"b": {"z": 1, "y": [{"d": 0, "c": None}]}, "a": []}, '{"a": [], "b": {"y": [{"c": null, "d": 0}], "z": 1}}'),
        ({"β": 1, "a": 2, "B": 3}, '{"B": 3, "a": 2, "β": 1}'),  # keys by code point
    ],
)
def test_render(value, text):
    assert render_value(value) == text


def test_golden_render():
    state = {"z": [1.0, 1e16, -0.0, True, None, "猫"], "a": {"β": "z", "a": "first"}}
    assert render_value(state) == '{"a": {"a": "first", "β": "z"}, "z": [1.0, 1e+16, -0.0, true, null, "猫"]}'


# --- prompts --------------------------------------------------------------------------------


def only_prompts(request):
    state_text, questions = compile_request(request, make_export().variant)
    return [prompts(state_text, q) for q in questions]


def test_choice_prompts():
    request = {
        "state": {"b": 1, "a": "é"},
        "questions": {
            "c": {"type": "choice", "instructions": "Pick one", "criteria": {"z": None, "y": "", "x": {"k": 2, "j": 1}}}
        },
    }
    context = 'Context:\n{"a": "é", "b": 1}\n\nQuestion: Pick one\nProposed answer: '
    assert only_prompts(request) == [
        [context + "z" + CHOICE_TAIL, context + "y: " + CHOICE_TAIL, context + 'x: {"j": 1, "k": 2}' + CHOICE_TAIL]
    ]


def test_score_prompts_have_no_level_prefix():
    request = {
        "state": ["a", 1],
        "questions": {
            "s": {"type": "score", "instructions": {"rubric": "quality"}, "criteria": ["bad", {"b": 2, "a": 1}, ["ok"]]}
        },
    }
    context = 'Context:\n["a", 1]\n\nQuestion: {"rubric": "quality"}\nProposed answer: '
    options = ["bad", '{"a": 1, "b": 2}', '["ok"]']
    assert only_prompts(request) == [[context + option + CHOICE_TAIL for option in options]]
    _, questions = compile_request(request, make_export().variant)
    assert questions[0].legend == {"0": "bad", "1": {"b": 2, "a": 1}, "2": ["ok"]}  # raw levels


def test_noul_prompts_with_and_without_criteria():
    request = body(
        {
            "plain": noul("Is it spam?"),
            "described": noul("Is it spam?", criteria={"false": "A real message", "true": "Advertising"}),
            "null": noul("Is it spam?", criteria=None),
        }
    )
    plain = "Context:\nx\n\nQuestion: Is it spam?" + NOUL_TAIL
    described = "Context:\nx\n\nQuestion: Is it spam?\nYes means: Advertising\nNo means: A real message" + NOUL_TAIL
    assert only_prompts(request) == [[plain], [described], [plain]]


def test_empty_state_and_instructions_are_allowed():
    for state in ("", {}, []):
        request = {"state": state, "questions": {"q": noul("")}}
        assert only_prompts(request) == [["Context:\n%s\n\nQuestion: %s" % (render_value(state), "") + NOUL_TAIL]]


# --- rejections -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        None,
        "open-jev",
        "jev-latest",
        "open-jev-27b-v1.1",
        "Qwen/Qwen3.8-27B",
        "Qwen/Qwen3.8-27B@1d4bf0f2ff6012fd82039f2fa52739d0dd7c60c0",
        "OPEN-JEV-27B-V1.1",
        " open-jev ",
    ],
)
def test_accepted_model_names(model):
    compile_request(body({"q": noul()}, model=model), make_export("27b-v1.1").variant)


def test_absent_model_is_accepted():
    compile_request(body({"q": noul()}), make_export("9b").variant)


@pytest.mark.parametrize(
    "variant,model",
    [
        ("27b-v1.1", "open-jev-9b"),
        ("9b", "open-jev-27b-v1.1"),
        ("9b", "Qwen/Qwen3.8-27B"),
        ("9b", "english"),
        ("9b", 5),
        ("9b", ["open-jev"]),
        ("9b", ""),
    ],
)
def test_unknown_model(variant, model):
    problem = rejected(body({"q": noul()}, model=model), 422, "unknown_model", make_export(variant))
    assert "requested model" in problem.detail and "not loaded" in problem.detail


@pytest.mark.parametrize(
    "request_body",
    [
        [],
        "x",  # not an object
        {"questions": {"q": noul()}},  # no state
        {"state": None, "questions": {"q": noul()}},
        {"state": 12, "questions": {"q": noul()}},
        {"state": True, "questions": {"q": noul()}},
        {"state": 1.5, "questions": {"q": noul()}},
        {"state": "x"},  # no questions
        {"state": "x", "questions": {}},
        {"state": "x", "questions": [noul()]},
        {"state": "x", "questions": None},
    ],
)
def test_invalid_request(request_body):
    rejected(request_body, 422, "invalid_request")


@pytest.mark.parametrize(
    "qdef",
    [
        "noul",
        None,
        [noul()],  # not an object
        {"type": "generation", "instructions": "x"},
        {"instructions": "x"},
        {"type": "Choice", "instructions": "x", "criteria": {"a": None}},
        {"type": "noul"},  # instructions required
        {"type": "noul", "instructions": None},
        {"type": "noul", "instructions": 5},
        {"type": "noul", "instructions": True},
        {"type": "choice", "instructions": "x", "criteria": {}},
        {"type": "choice", "instructions": "x"},
        {"type": "choice", "instructions": "x", "criteria": ["a", "b"]},  # choice takes an object
        {"type": "choice", "instructions": "x", "criteria": {"a": 4}},
        {"type": "choice", "instructions": "x", "criteria": {"a": True}},
        {"type": "choice", "instructions": "x", "criteria": {"a": 1.5, "b": None}},
        {"type": "score", "instructions": "x", "criteria": ["one"]},
        {"type": "score", "instructions": "x", "criteria": []},
        {"type": "score", "instructions": "x", "criteria": {"0": "low", "1": "high"}},
        {"type": "score", "instructions": "x", "criteria": ["low", None]},
        {"type": "score", "instructions": "x", "criteria": ["low", 2]},
        {"type": "score", "instructions": "x"},
        {"type": "noul", "instructions": "x", "criteria": {"true": "yes"}},  # one-sided
        {"type": "noul", "instructions": "x", "criteria": {"false": "no"}},
        {"type": "noul", "instructions": "x", "criteria": {"true": "yes", "false": None}},
        {"type": "noul", "instructions": "x", "criteria": {"true": "yes", "false": 0}},
        {"type": "noul", "instructions": "x", "criteria": {"TRUE": "yes", "FALSE": "no"}},
        {"type": "noul", "instructions": "x", "criteria": {"true": "yes", "false": "no", "maybe": "?"}},
        {"type": "noul", "instructions": "x", "criteria": {}},
        {"type": "noul", "instructions": "x", "criteria": ["yes", "no"]},
        {"type": "noul", "instructions": "x", "criteria": "yes"},
    ],
)
def test_invalid_question(qdef):
    problem = rejected(body({"q": qdef}), 422, "invalid_question")
    assert [e["question"] for e in problem.errors] == ["q"]


def test_every_invalid_question_is_listed():
    problem = rejected(
        body(
            {
                "a": {"type": "score", "instructions": "x", "criteria": ["one"]},
                "ok": noul(),
                "b": {"type": "nope", "instructions": "x"},
            }
        ),
        422,
        "invalid_question",
    )
    assert [e["question"] for e in problem.errors] == ["a", "b"]
    assert "2 to 10 levels" in problem.errors[0]["detail"]


def test_question_count_limits():
    variant = make_export().variant
    compile_request(body({"q%d" % i: noul() for i in range(4096)}), variant)
    problem = rejected(body({"q%d" % i: noul() for i in range(4097)}), 413, "too_many_questions")
    assert "4097" in problem.detail


def test_choice_and_score_limits():
    variant = make_export().variant
    choice = {"type": "choice", "instructions": "Pick", "criteria": {str(i): None for i in range(255)}}
    _, (question,) = compile_request(body({"q": choice}), variant)
    assert question.candidates == 255
    choice["criteria"]["extra"] = None
    rejected(body({"q": choice}), 422, "invalid_question")
    for levels, ok in ((1, False), (2, True), (10, True), (11, False)):
        request = body({"q": {"type": "score", "instructions": "Rate", "criteria": ["level"] * levels}})
        if ok:
            assert compile_request(request, variant)[1][0].candidates == levels
        else:
            rejected(request, 422, "invalid_question")


def test_candidate_limit():
    """At most 65,536 candidates in one request: a noul counts 1, choice and score one per option."""
    choice = {"type": "choice", "instructions": "Pick", "criteria": {str(i): None for i in range(255)}}
    questions = {"c%d" % i: choice for i in range(257)}  # 65,535
    questions["n0"] = noul()
    _, compiled = compile_request(body(questions), make_export().variant)
    assert sum(q.candidates for q in compiled) == LIMITS.max_candidates == 65_536
    questions["n1"] = noul()
    problem = rejected(body(questions), 413, "too_large")
    assert "65537" in problem.detail


# --- tokenization and chat wrapping ---------------------------------------------------------


def test_chat_specials_are_single_ids(tokenizer):
    for text in ("<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|endoftext|>"):
        ids = tokenizer.encode(text)
        assert len(ids) == 1 and tokenizer.tokenizer.id_to_token(ids[0]) == text
    assert tokenizer.encode("\n") == [198] and tokenizer.encode(":") == [25]


def test_chat_prefix_and_suffix_ids(tokenizer):
    enc, tid = tokenizer.encode, tokenizer.tokenizer.token_to_id
    assert CHAT_PREFIX == "<|im_start|>user\n"
    assert CHAT_SUFFIX == "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert enc(CHAT_PREFIX) == [tid("<|im_start|>"), *enc("user"), 198]
    two_newlines = enc("\n\n")
    assert len(two_newlines) == 1  # 271 in the real tokenizer
    assert enc(CHAT_SUFFIX) == [
        tid("<|im_end|>"),
        198,
        tid("<|im_start|>"),
        *enc("assistant"),
        198,
        tid("<think>"),
        *two_newlines,
        tid("</think>"),
        *two_newlines,
    ]


def test_wrap_strips_the_prompt():
    assert wrap("  \n Context:\nx\n ", make_export()) == CHAT_PREFIX + "Context:\nx" + CHAT_SUFFIX


def test_candidate_ids_are_the_wrapped_prompt(tokenizer, export27):
    request = body(
        {
            "c": {"type": "choice", "instructions": "Pick", "criteria": {"a": None, "b": "B"}},
            "n": noul("Ready?", criteria={"true": "yes", "false": "no"}),
        }
    )
    rows, context, usage = prepare(request, tokenizer, export27)
    state_text, questions = compile_request(request, export27.variant)
    texts = [p for q in questions for p in prompts(state_text, q)]
    enc = tokenizer.encode
    assert [r.ids.tolist() for r in rows] == [enc(CHAT_PREFIX) + enc(t) + enc(CHAT_SUFFIX) for t in texts]
    assert [r.question for r in rows] == [0, 0, 1]
    assert all(r.ids.dtype.name == "int32" for r in rows)
    assert usage == {"input_tokens": sum(len(r.ids) for r in rows), "output_tokens": 0}
    assert context.input_tokens == usage["input_tokens"] and context.candidates == 3


def test_request_text_spelling_specials_becomes_special_ids(tokenizer, export27):
    request = {"state": "before<|im_end|>after<think>", "questions": {"q": noul()}}
    (row,), _, _ = prepare(request, tokenizer, export27)
    ids = row.ids.tolist()
    tid = tokenizer.tokenizer.token_to_id
    assert ids.count(tid("<|im_end|>")) == 2 and ids.count(tid("<think>")) == 2


def test_candidate_counting(tokenizer, export9):
    request = body(
        {
            "c": {"type": "choice", "instructions": "x", "criteria": {k: None for k in "abcde"}},
            "s": {"type": "score", "instructions": "x", "criteria": ["l", "m", "h"]},
            "n": noul(),
            "d": noul(criteria={"true": "t", "false": "f"}),
        }
    )
    rows, context, usage = prepare(request, tokenizer, export9)
    assert len(rows) == context.candidates == 5 + 3 + 1 + 1
    assert [q.candidates for q in context.questions] == [5, 3, 1, 1]
    assert [r.question for r in rows] == [0] * 5 + [1] * 3 + [2, 3]
    assert usage["input_tokens"] == sum(len(r.ids) for r in rows)


def test_max_length_is_never_truncated(tokenizer):
    route = {"type": "choice", "instructions": "Route", "criteria": {"technical": None, "billing": None}}
    request = body({"a": route, "z": noul("Verify")})
    rows, _, _ = prepare(request, tokenizer, make_export())
    longest = max(len(r.ids) for r in rows)
    prepare(request, tokenizer, make_export(max_length=longest))  # exactly max_length fits
    with pytest.raises(RequestError) as info:
        prepare(request, tokenizer, make_export(max_length=longest - 1))
    problem = info.value
    assert (problem.status, problem.code) == (413, "input_too_long")
    assert problem.detail == (
        "question a: %d tokens exceeds max_length=%d; no silent truncation" % (longest, longest - 1)
    )


def test_a_later_long_question_fails_the_whole_request(tokenizer):
    short = body({"a": noul("x"), "b": noul("x")})
    rows, _, _ = prepare(short, tokenizer, make_export())
    limit = max(len(r.ids) for r in rows)
    long = body({"a": noul("x"), "b": noul("x " * 40)})
    with pytest.raises(RequestError) as info:
        prepare(long, tokenizer, make_export(max_length=limit))
    assert info.value.code == "input_too_long" and info.value.detail.startswith("question b: ")
    assert info.value.detail.endswith("exceeds max_length=%d; no silent truncation" % limit)
    assert info.value.errors == [{"question": "b", "detail": info.value.detail}]


def test_validation_precedes_tokenization(tokenizer):
    """An invalid question is reported as such even when another candidate is over-long."""
    request = body({"long": noul("x " * 5000), "bad": {"type": "score", "instructions": "x", "criteria": ["a"]}})
    with pytest.raises(RequestError) as info:
        prepare(request, tokenizer, make_export(max_length=16))
    assert info.value.code == "invalid_question"


# --- the jev profile (what the hosted Jev API takes beyond upstream) ----------------------------


def jev_prompts(request):
    state, questions = compile_request(request, make_export("27b-v1.1").variant, profile="jev")
    return [prompts(state, q) for q in questions]


def test_jev_profile_takes_one_sided_and_null_noul_criteria_in_layas_words():
    request = body(
        {
            "t": noul("Is it spam?", criteria={"true": "Advertising"}),
            "f": noul("Is it spam?", criteria={"false": "A real message"}),
            "n": noul("Is it spam?", criteria={"true": None, "false": "A real message"}),
        }
    )
    head = "Context:\nx\n\nQuestion: Is it spam?\n"
    assert jev_prompts(request) == [
        [head + "Yes means: Advertising\nNo means: no, the statement does not hold" + NOUL_TAIL],
        [head + "Yes means: yes, the statement holds\nNo means: A real message" + NOUL_TAIL],
        [head + "Yes means: yes, the statement holds\nNo means: A real message" + NOUL_TAIL],
    ]
    for qdef in request["questions"].values():  # the reference profile keeps upstream's 422
        rejected(body({"q": qdef}), 422, "invalid_question")


def test_jev_profile_takes_a_noul_without_instructions_its_criteria_as_text():
    criteria = {"true": "The customer threatens a chargeback", "false": "No threat"}
    question = {"type": "noul", "criteria": criteria}
    as_text = noul(criteria, criteria=criteria)  # the same criteria given as the instructions
    assert jev_prompts(body({"q": question})) == jev_prompts(body({"q": as_text}))
    rejected(body({"q": question}), 422, "invalid_question")
    for bad in ({"type": "noul"}, {"type": "noul", "criteria": {}}, {"type": "choice", "criteria": {"a": None}}):
        with pytest.raises(RequestError):
            compile_request(body({"q": bad}), make_export("27b-v1.1").variant, profile="jev")
