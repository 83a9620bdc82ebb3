"""Write the JSONL workloads the load generator sends (deterministic).

python -m benchmarks.make_workloads
"""

from __future__ import annotations

import json
import os
import random

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads")
TICKETS = [
    "I was charged twice for my order. Please refund the duplicate today.",
    "The app crashes every time I open the settings page after the update.",
    "Can you change the delivery address on order 5531 to my office?",
    "My password reset email never arrives, I checked the spam folder too.",
    "The invoice total does not match the quote you sent last week.",
    "I love the new dashboard, thanks for the quick fix on exports!",
    "Cancel my subscription effective immediately and confirm by email.",
    "Shipping took three weeks and the box arrived damaged and wet.",
]


def fit_state(body: dict, state_ids: list[int], tokens: int, count, tok) -> dict | None:
    """`body` with a state cut from `state_ids` so that `count(body)`, the row length as the
    served model counts it, is exactly `tokens`; None where eight nudges miss (a cut can merge
    with its neighbours at the seam)."""
    keep = tokens - count(dict(body, state="x")) + 1  # state tokens to keep, then nudge
    for _ in range(8):
        body = dict(body, state=tok.tokenizer.decode(state_ids[: max(1, keep)]))
        got = count(body)
        if got == tokens:
            return body
        keep += tokens - got
    return None


def fitted(n: int, body: dict, draw_state, tokens: int, count, tok) -> list[dict]:
    """`n` copies of `body`, each with a state from `draw_state()` (token ids) that fit_state
    cuts to an exactly `tokens`-long row; draws that miss are drawn again."""
    out = []
    while len(out) < n:
        fit = fit_state(body, draw_state(), tokens, count, tok)
        if fit is not None:
            out.append(fit)
    return out


def laya_requests(n: int, questions: int, seed: int, long_state: bool = False) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        state = rng.choice(TICKETS)
        if long_state:
            state = " ".join(rng.choice(TICKETS) for _ in range(8))
        qs = {
            "department": {
                "type": "choice",
                "instructions": "Which team should handle this?",
                "criteria": {
                    "billing": "Charges and refunds",
                    "technical": "Software problems",
                    "logistics": "Shipping and delivery",
                },
            },
            "urgency": {
                "type": "score",
                "instructions": "How urgent is the request?",
                "criteria": ["Not urgent", "Needs attention soon", "Needs attention immediately"],
            },
            "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
        }
        keys = list(qs)[:questions]
        out.append({"model": "english", "state": state, "questions": {k: qs[k] for k in keys}})
    return out


def laya_tokenizer():
    """The tokenizer the random-weight english Laya checkpoints carry (trained deterministically):
    a tiny checkpoint's, whose tokenizer is the full-size one's."""
    import tempfile

    from models.laya import random_checkpoint
    from models.tokenizer import TokenizerHandle

    directory = random_checkpoint.build(tempfile.mkdtemp(), "english", "tiny")
    return TokenizerHandle.load(os.path.join(directory, "tokenizer"))


def laya_rows_of(tokens: int, n: int, seed: int, tok, tickets: int = 4) -> list[dict]:
    """One-question Laya requests whose row is exactly `tokens` long with the benchmark tokenizer:
    the targets' Laya workload is a 48-token row (reference/performance.md). laya_1q's rows are
    78-92 tokens with this tokenizer (a 1,200-entry vocabulary splits words finely), so it
    measures about twice the target's arithmetic. Three options, named only, and the start of a
    ticket as the state."""
    from models.laya.prepare import LayaLimits, RowBuilder, prepare_rows

    builder = RowBuilder(tok, 512, 192)

    def count(body):
        return len(prepare_rows(body, builder, LayaLimits())[1][0].ids)

    rng = random.Random(seed)
    question = {
        "department": {
            "type": "choice",
            "instructions": "Which team should handle this?",
            "criteria": {"billing": None, "technical": None, "logistics": None},
        }
    }
    return fitted(
        n,
        {"model": "english", "state": "x", "questions": question},
        lambda: tok.encode(" ".join(rng.choice(TICKETS) for _ in range(tickets))),
        tokens,
        count,
        tok,
    )


def laya_spread(n: int, low: int, high: int, seed: int, tok) -> list[dict]:
    """One-question Laya requests whose row lengths spread log-uniformly over [low, high] tokens
    (exact with the benchmark tokenizer), in random order: traffic of many lengths, which makes
    many bucketed shapes and so tests the CUDA graph budget (OMNI_CUDA_GRAPHS). laya_rows_of's
    question and states cut from a long run of tickets."""
    import math

    rng = random.Random(seed)
    lengths = [round(math.exp(rng.uniform(math.log(low), math.log(high)))) for _ in range(n)]
    out = []
    for i, tokens in enumerate(lengths):
        out += laya_rows_of(tokens, 1, seed * 1000 + i, tok, tickets=max(4, tokens // 8))
    return out


SCREENS = [
    "button 'Save' focused",
    "link 'Help'",
    "textbox 'Email' empty",
    "checkbox 'Remember me' unchecked",
    "menu 'File' collapsed",
    "button 'Cancel'",
    "image 'Logo'",
    "list 'Recent files' 5 items",
]


def qwen_tokenizer():
    """The tokenizer the random-weight Qwen3.5 checkpoints carry (trained deterministically)."""
    from models.qwen35 import tokenizer_build
    from models.tokenizer import TokenizerHandle
    import tempfile

    directory = tempfile.mkdtemp()
    tokenizer_build.save(directory, prompts=True)  # as random_checkpoint's full sizes
    return TokenizerHandle.load(directory)


CUA_QUESTIONS = [  # upstream-fixture-like (3 options and a goal), then a minimal one for short prompts
    {
        "act": {
            "type": "choice",
            "instructions": "Save the document.",
            "criteria": {"save": "Click Save", "cancel": "Click Cancel", "help": "Open Help"},
        }
    },
    {"act": {"type": "choice", "instructions": None, "criteria": {"ok": "Click", "cancel": "Cancel"}}},
]


def cua_requests(n: int, tokens: int, seed: int, tok) -> list[dict]:
    """Cua-S1 requests whose prompt is exactly `tokens` long with the benchmark tokenizer."""
    from models.cua_s1.prepare import prepare_rows

    def count(body):
        return len(prepare_rows(body, tok)[1][0])

    rng = random.Random(seed)
    questions = next(
        (q for q in CUA_QUESTIONS if count({"model": "cua-s1-4b-0.2", "state": "x", "questions": q}) < tokens - 4),
        CUA_QUESTIONS[-1],
    )
    return fitted(
        n,
        {"model": "cua-s1-4b-0.2", "state": "x", "questions": questions},
        lambda: tok.encode("\n".join(rng.choice(SCREENS) for _ in range(120))),
        tokens,
        count,
        tok,
    )


def cua_spread(n: int, low: int, high: int, seed: int, tok) -> list[dict]:
    """Cua-S1 requests whose prompt lengths spread log-uniformly over [low, high] tokens (each
    exact), in random order: traffic of many lengths, one row each, as a fresh server meets it."""
    import math

    rng = random.Random(seed)
    lengths = [round(math.exp(rng.uniform(math.log(low), math.log(high)))) for _ in range(n)]
    return [cua_requests(1, tokens, seed * 1000 + i, tok)[0] for i, tokens in enumerate(lengths)]


def open_jev_noul(n: int, low: int, high: int, seed: int, tok) -> list[dict]:
    """Single-candidate noul requests, prompt lengths spread log-uniformly over [low, high]
    tokens (each exact, counted as the served model counts them), shuffled."""
    import math

    import numpy as np

    from models.open_jev.checkpoint import CHAT_PREFIX, CHAT_SUFFIX, VARIANTS, MergedExport
    from models.open_jev.prepare import prepare

    v = VARIANTS["9b"]
    export = MergedExport(
        v.model_id,
        v.base_revision,
        v.revision,
        v.temperature,
        4096,
        CHAT_PREFIX,
        CHAT_SUFFIX,
        np.zeros(1, dtype=np.float32),
        0.0,
    )
    rng = random.Random(seed)
    words = tok.encode(" ".join(rng.choice(TICKETS) for _ in range(900)))

    def count(body):
        return len(prepare(body, tok, export)[0][0].ids)

    out = []
    for i in range(n):
        tokens = round(math.exp(math.log(low) + (math.log(high) - math.log(low)) * i / (n - 1)))
        question = {"refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"}}
        body = fit_state({"model": "open-jev-9b", "state": "x", "questions": question}, words, tokens, count, tok)
        if body is not None:
            out.append(body)
    rng.shuffle(out)
    return out


def clef_requests(n: int, questions: int, seed: int) -> list[dict]:
    """Clef-Flash requests with `questions` questions over a support ticket, types mixed."""
    rng = random.Random(seed)
    kinds = [
        (
            "department",
            {
                "type": "choice",
                "instructions": "Which team should handle this?",
                "criteria": {
                    "billing": "Payments or invoices",
                    "technical": "Software problems",
                    "logistics": "Shipping and delivery",
                },
            },
        ),
        (
            "urgency",
            {
                "type": "score",
                "instructions": "How urgent is the request?",
                "criteria": ["Not urgent", "Needs attention soon", "Needs attention immediately"],
            },
        ),
        ("refund", {"type": "noul", "instructions": "Does the customer ask for a refund?"}),
        (
            "sentiment",
            {
                "type": "choice",
                "instructions": "What is the customer's tone?",
                "criteria": {"angry": None, "neutral": None, "happy": None},
            },
        ),
    ]
    out = []
    for _ in range(n):
        qs = {}
        for i in range(questions):
            name, q = kinds[i % len(kinds)]
            qs["%s_%d" % (name, i)] = q
        out.append({"model": "clef-flash", "state": " ".join(rng.choice(TICKETS) for _ in range(3)), "questions": qs})
    return out


def main() -> None:
    os.makedirs(HERE, exist_ok=True)
    sets = {"laya_1q.jsonl": laya_requests(64, 1, 1), "laya_3q.jsonl": laya_requests(64, 3, 2, long_state=True)}
    laya_tok = laya_tokenizer()
    sets["laya_48.jsonl"] = laya_rows_of(48, 64, 3, laya_tok)
    sets["laya_spread.jsonl"] = laya_spread(256, 40, 480, 5, laya_tok)
    tok = qwen_tokenizer()
    for tokens in (139, 218, 292):
        sets["cua_%d.jsonl" % tokens] = cua_requests(32, tokens, tokens, tok)
    sets["cua_spread.jsonl"] = cua_spread(256, 139, 1100, 9, tok)
    sets["open_jev_noul.jsonl"] = open_jev_noul(48, 80, 3399, 7, tok)
    # The same prompts for the 27B: both variants frame a candidate alike (models.open_jev.prepare).
    sets["open_jev_noul_27b.jsonl"] = [dict(b, model="open-jev-27b-v1.1") for b in sets["open_jev_noul.jsonl"]]
    for q in (1, 4, 16):
        sets["clef_%dq.jsonl" % q] = clef_requests(32, q, 20 + q)
    for name, rows in sets.items():
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(name, len(rows))


if __name__ == "__main__":
    main()
