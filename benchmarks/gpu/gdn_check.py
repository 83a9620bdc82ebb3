"""Which part of a reduced-precision GPU export drifts: on a tiny random Qwen3.5 checkpoint,
export fp32 and fp16 graphs with each GDN kernel and compare ONNX Runtime CUDA with the torch
fp32 module (hidden state at the last token, rows of 5, 70 and 150 tokens).

    python -m benchmarks.gpu.gdn_check [--out results.json]
"""
from __future__ import annotations

import argparse
import json
import tempfile


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    import numpy as np
    import onnxruntime as ort
    import torch

    from models.qwen35 import export, random_checkpoint, weights
    from models.qwen35.dims import TextDims

    ort.preload_dlls()
    root = tempfile.mkdtemp()
    ck = random_checkpoint.build(root + "/ck", "tiny", tied=True, seed=1)
    dims = TextDims.from_dir(ck)
    state = weights.load_text_state(ck, torch.float32)
    ref_module = export.build_module(dims, state, "last", "float32")
    results = {}
    rng = np.random.default_rng(0)
    cases = [rng.integers(0, 900, size=(1, n), dtype=np.int64) for n in (5, 70, 150)]
    with torch.no_grad():
        want = [ref_module(torch.from_numpy(ids), torch.tensor([ids.shape[1] - 1])).numpy() for ids in cases]
    for dtype in ("float32", "float16"):
        for kernel in ("linear_attention", "gated_delta_net"):
            label = "%s-%s" % (dtype, kernel)
            out = "%s/%s" % (root, label)
            import os

            os.makedirs(out)
            module = export.build_module(dims, state, "last", dtype)
            path = export.export_graph(module, out, kernel, progress=lambda m: None)
            session = ort.InferenceSession(path, providers=["CUDAExecutionProvider"])
            diffs = []
            for ids, w in zip(cases, want):
                (h,) = session.run(None, {"input_ids": ids, "positions": np.array([ids.shape[1] - 1])})
                diffs.append(float(np.abs(h.astype(np.float32) - w).max() / np.abs(w).max()))
            results[label] = diffs
            print(label, ["%.2e" % d for d in diffs], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
