"""How many of a workload's tokens a shared prefix would spare: each request's rows as the
export's own preparation builds them, against the same rows with the tokens they all start with
run once (the request's prefix: chat turn, state, and for one question its text) and only each
row's rest run per row.

    python -m benchmarks.prefix_share --export DIR --workload traffic.jsonl [--out share.json]

For models whose work is one token row per candidate (Open-Jev, Cua-S1: models/qwen35/rows.py),
a causal model's hidden state at a row's last token depends only on that row's tokens, so this is
the forward work a request needs at most once its prefix's states feed each candidate's suffix.
Two splits are counted: one prefix a request (what every row shares) and one a question (each
question's rows share the state and the question's text). A model whose work is not a list of
token rows (Laya's packed rows, Clef-Flash's records) is refused.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from models.qwen35 import prefix


def spared(groups: Sequence[Sequence[Sequence[int]]]) -> tuple[int, int]:
    """(tokens as run, tokens with each group's common prefix run once) over groups of rows."""
    run = shared = 0
    for rows in groups:
        lengths = [len(r) for r in rows]
        n = prefix.common(rows) if len(rows) > 1 else 0  # a lone row shares nothing
        run += sum(lengths)
        shared += n + sum(k - n for k in lengths)
    return run, shared


def count(model, bodies: Sequence[dict]) -> dict:
    """The workload's tokens as run and with shared prefixes, per request and per question."""
    per_request: list[list[list[int]]] = []
    per_question: list[list[list[int]]] = []
    for body in bodies:
        prepared = model.prepare(body)
        if not isinstance(prepared.work, list) or not all(hasattr(r, "__len__") for r in prepared.work):
            raise ValueError("%s: its work is not a list of token rows" % model.name)
        rows = [[int(t) for t in r] for r in prepared.work]
        per_request.append(rows)
        # Rows come grouped by question, a question's candidates in order (Open-Jev); a model
        # that says nothing of its candidates counts one group a request.
        sizes = [getattr(q, "candidates", 0) for q in getattr(prepared.context, "questions", [])]
        if sizes and sum(sizes) == len(rows):
            starts = [sum(sizes[:i]) for i in range(len(sizes))]
            per_question.extend(rows[a : a + k] for a, k in zip(starts, sizes, strict=True))
        else:
            per_question.append(rows)
    run, request = spared(per_request)
    _, question = spared(per_question)
    return {
        "requests": len(bodies),
        "rows": sum(len(r) for r in per_request),
        "tokens_run": run,
        "tokens_shared_per_request": request,
        "tokens_shared_per_question": question,
        "ratio_per_request": round(run / request, 3) if request else None,
        "ratio_per_question": round(run / question, 3) if question else None,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", required=True)
    ap.add_argument("--workload", required=True, help="JSONL request bodies (benchmarks.traffic)")
    ap.add_argument("--out", help="write the counts here as JSON too")
    args = ap.parse_args(argv)
    from models.registry import load

    with open(args.workload, encoding="utf-8") as f:
        bodies = [json.loads(line) for line in f if line.strip()]
    report = count(load(args.export), bodies)
    print(json.dumps(report))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
