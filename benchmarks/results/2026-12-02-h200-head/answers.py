"""Two Cua-S1 exports of one checkpoint served side by side in-process on ONNX Runtime CUDA: each
request of a workload prepared, packed, run and finished by each export's own code (alone, then
all requests as one batch), and the answers compared: the largest probability difference, how
many choices differ, and how far apart the fp32 margins of those that do are.

    python3 answers.py EXPORT_A EXPORT_B WORKLOAD.jsonl
"""
import json
import os
import sys

import numpy as np

from app.runtime import sessions
from models.registry import load

a, b, workload = sys.argv[1:4]
bodies = [json.loads(line) for line in open(workload)]


def answers(directory):
    model = load(directory)
    session = sessions.create(model.onnx_path, os.environ.get("DEVICE", "cuda")).session

    def run(prepared):
        packed = model.adapter.pack([p.work for p in prepared])
        outputs = [session.run(None, part) for part in packed.parts]
        return [model.finish(p, o, "reference", model.name)
                for p, o in zip(prepared, model.adapter.unpack(outputs, [p.work for p in prepared], packed))]

    prepared = [model.prepare(body) for body in bodies]
    alone = [run([p])[0] for p in prepared]
    together = run(prepared)
    return alone, together


def probs(response):
    return {(q, k): v for q, ans in response["answers"].items() for k, v in ans["probabilities"].items()}


(a_alone, a_together), (b_alone, b_together) = answers(a), answers(b)
for name, xs, ys in (("A alone vs A batched", a_alone, a_together), ("B alone vs B batched", b_alone, b_together),
                     ("A vs B (alone)", a_alone, b_alone)):
    diff, differ, margins = 0.0, 0, []
    for x, y in zip(xs, ys):
        px, py = probs(x), probs(y)
        diff = max(diff, max(abs(px[k] - py[k]) for k in px))
        for q in x["answers"]:
            if x["answers"][q]["choice"] != y["answers"][q]["choice"]:
                differ += 1
                top = sorted(v for (qq, _), v in px.items() if qq == q)
                margins.append(top[-1] - top[-2])
    print("%s: %d requests, max |dp| %.4g, choices differing %d%s" % (
        name, len(xs), diff, differ, (" (A's margins there: %s)" % ", ".join("%.3g" % m for m in margins)) if margins else ""))
