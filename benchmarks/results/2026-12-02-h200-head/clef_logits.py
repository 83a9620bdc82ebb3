"""A Clef-Flash export's logits for each request of a workload, through its own prepare, adapter
and finish on ONNX Runtime CUDA, saved; given a saved file too, the largest difference from it
(logits and probabilities) and how many choices differ.

    python3 clef_logits.py EXPORT WORKLOAD.jsonl OUT.npz [SAVED.npz]
"""
import json
import sys

import numpy as np

from app.runtime import sessions
from models.registry import load

export, workload, out = sys.argv[1:4]
model = load(export)
session = sessions.create(model.onnx_path, "cuda").session
logits, probs, choices = [], [], []
for line in open(workload):
    body = json.loads(line)
    prepared = model.prepare(body)
    packed = model.adapter.pack([prepared.work])
    (output,) = model.adapter.unpack([session.run(None, part) for part in packed.parts], [prepared.work], packed)
    answer = model.finish(prepared, output, "reference", model.name)["answers"]
    logits.append(np.asarray(output, dtype=np.float64))
    probs.append(np.array([p for a in answer.values() for p in a.get("probabilities", {}).values()]))
    choices.append([str(a.get("choice", a.get("noul"))) for a in answer.values()])
np.savez(out, logits=np.concatenate(logits), probs=np.concatenate(probs), choices=np.array(sum(choices, [])))
print("%s: %d requests, %d option logits" % (export, len(logits), sum(len(x) for x in logits)))
if len(sys.argv) > 4:
    saved = np.load(sys.argv[4])
    print("against %s: max |d logit| %.4g (largest |logit| %.3g), max |d p| %.4g, choices differing %d of %d" % (
        sys.argv[4], np.abs(saved["logits"] - np.concatenate(logits)).max(), np.abs(saved["logits"]).max(),
        np.abs(saved["probs"] - np.concatenate(probs)).max(),
        int((saved["choices"] != np.array(sum(choices, []))).sum()), len(saved["choices"])))
