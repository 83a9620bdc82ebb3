"""Two exports of one checkpoint on ONNX Runtime CUDA, the same random rows through each: the
largest difference of their outputs, absolute and relative to the first's largest value.

    python3 compare.py EXPORT_A EXPORT_B
"""
import json
import os
import sys

import numpy as np
import onnxruntime as ort

ort.preload_dlls()
a, b = sys.argv[1:3]
rng = np.random.default_rng(0)
vocab = json.load(open(os.path.join(a, "manifest.json")))["dims"]["vocab_size"]
rows = [rng.integers(0, vocab, size=(1, 224)), rng.integers(0, vocab, size=(3, 100)), rng.integers(0, vocab, size=(1, 1100))]
sessions = [ort.InferenceSession(os.path.join(x, "model.onnx"), providers=["CUDAExecutionProvider"]) for x in (a, b)]
for ids in rows:
    feeds = {"input_ids": ids.astype(np.int64), "positions": np.full((ids.shape[0],), ids.shape[1] - 1, dtype=np.int64)}
    outs = [s.run(None, feeds)[0].astype(np.float64) for s in sessions]
    diff = np.abs(outs[0] - outs[1]).max()
    print("%s: max |a - b| %.3g, relative to max |a| %.3g, finite %s" % (
        "x".join(map(str, ids.shape)), diff, diff / np.abs(outs[0]).max(), all(np.isfinite(o).all() for o in outs)))
