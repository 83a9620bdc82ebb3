"""Seeded traffic like users send, per model: 1-3 questions of the types the model takes, mixed;
2 options or levels up to a dozen (now and then the model's limit); states from one word to
near the model's token limit, drawn log-uniformly (many short, some long); Unicode throughout.

    python -m benchmarks.traffic --export DIR --n 256 --seed 60 --out benchmarks/workloads/traffic_laya.jsonl
    python -m benchmarks.traffic --export DIR --params    # dense parameters, billions (load.py --params-b)

The limits come from the export itself (its served model's `limits()`), and the export's own
preparation checks each request: a state that tokenizes past the model's limit is cut in half
until it fits, so every request is one the model accepts (`within`): the headline workloads of
docs/benchmarks.md. The conformance suite
(tests/models/conformance.py) draws its concurrent traffic from here too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
from typing import TYPE_CHECKING

from models.errors import InputTooLong

if TYPE_CHECKING:
    from models.base import ServedModel

WORDS = [
    "refund",
    "charged",
    "twice",
    "order",
    "login",
    "fails",
    "since",
    "update",
    "please",
    "today",
    "café",
    "naïve",
    "Straße",
    "日本語",
    "привет",
    "مرحبا",
    "🙂",
    "ticket",
    "#4411",
    "€12.50",
    "{json}",
    "line\nbreak",
    "tab\there",
    "«quoted»",
    "ÅÄÖ",
    "ﬁ",
]

# Tokens a word takes at most, on average, across the families' tokenizers (Unicode words take
# several): states are kept to the model's limit over this, less room for the questions.
TOKENS_A_WORD = 3


def token_limit(limits: dict) -> int | None:
    """The model's input limit in tokens, under whichever name its family gives it."""
    for key in ("max_len", "max_prompt_tokens", "max_length"):
        if limits.get(key):
            return int(limits[key])
    return None


def _question(rng: random.Random, kind: str, limits: dict, cap: int) -> dict:
    if kind == "noul":
        return {"type": "noul", "instructions": rng.choice(WORDS) + " asked?"}
    limit = limits.get("max_score_levels" if kind == "score" else "max_choice_options", cap)
    top = min(limit, 10 if kind == "score" else 40) if rng.random() < 0.05 else min(limit, cap)
    k = rng.randint(2, max(2, top))
    criteria: list[str] | dict[str, str] = (
        ["level %d" % j for j in range(k)]
        if kind == "score"
        else {"o%d" % j: "option %d: %s" % (j, WORDS[j % len(WORDS)]) for j in range(k)}
    )
    return {"type": kind, "instructions": "Which fits? " + rng.choice(WORDS), "criteria": criteria}


def traffic(model: str, limits: dict, n: int, seed: int, max_words: int | None = None, cap: int = 12) -> list[dict]:
    """`n` requests, seeded: 1-3 questions of the model's types, 2 to `cap` options or levels
    (one in twenty up to the model's limit, at most 40), states of 1 to `max_words` words (default:
    near the model's token limit), log-uniform."""
    rng = random.Random(seed)
    types = limits["question_types"]
    if max_words is None:
        tokens = token_limit(limits) or 512
        max_words = max(1, (tokens - 256) // TOKENS_A_WORD)
    out = []
    for i in range(n):
        questions = {"q%d" % q: _question(rng, rng.choice(types), limits, cap) for q in range(rng.randint(1, 3))}
        words = min(max_words, int(math.exp(rng.uniform(0.0, math.log(max_words + 1)))))
        state = " ".join(rng.choice(WORDS) for _ in range(max(1, words)))
        out.append({"model": model, "state": "%d: %s" % (i, state), "questions": questions})
    return out


def within(model: ServedModel, body: dict) -> dict:
    """`body` with its state halved, word by word, until the model's preparation accepts it as
    not too long (the words-to-tokens estimate misses on Unicode-heavy states)."""
    while True:
        try:
            model.prepare(body)
            return body
        except InputTooLong:
            head, _, words = body["state"].partition(": ")
            kept = words.split(" ")
            if len(kept) < 2:
                raise
            body = {**body, "state": "%s: %s" % (head, " ".join(kept[: len(kept) // 2]))}


def dense_parameters(export_dir: str) -> int:
    """The parameters a token's forward pass multiplies by: the export graph's initializers, less
    the tables only looked up (a Gather's data: embeddings cost no products). Read from the graph
    alone, its external weights left on disk."""
    import onnx

    from models import manifest

    graph = onnx.load(os.path.join(export_dir, manifest.read(export_dir)["onnx"]), load_external_data=False).graph
    looked_up = {node.input[0] for node in graph.node if node.op_type == "Gather"}
    used_otherwise = {name for node in graph.node if node.op_type != "Gather" for name in node.input}
    return sum(math.prod(t.dims) for t in graph.initializer if t.name not in looked_up or t.name in used_otherwise)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", required=True, help="the export whose model and limits the traffic is for")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--seed", type=int, default=60)
    ap.add_argument("--max-words", type=int, help="longest state in words (default: near the model's limit)")
    ap.add_argument("--out", help="the workload file to write")
    ap.add_argument("--params", action="store_true", help="print the export's dense parameters, billions")
    args = ap.parse_args(argv)
    if args.params:
        print("%.6f" % (dense_parameters(args.export) / 1e9))
        return
    if not args.out:
        ap.error("--out is required")
    from models.registry import load

    model = load(args.export)
    bodies = [within(model, b) for b in traffic(model.name, model.limits(), args.n, args.seed, args.max_words)]
    with open(args.out, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(b, ensure_ascii=False) + "\n" for b in bodies)


if __name__ == "__main__":
    main()
