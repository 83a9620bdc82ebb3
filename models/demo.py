"""The demo model `make serve` falls back to: a random-weight Laya english checkpoint in the
published layout, exported once (export-time dependencies: torch, transformers, onnx)."""
from __future__ import annotations

import os
import sys


def ensure_demo(root: str) -> str:
    """Export directory of the demo model under `root`, built on first use."""
    out = os.path.join(root, "english")
    if os.path.exists(os.path.join(out, "manifest.json")):
        return out
    from models.laya import export, random_checkpoint

    print("building the random-weight demo checkpoint (first run only)...", file=sys.stderr, flush=True)
    checkpoint = random_checkpoint.build(os.path.join(root, "laya-english-demo-random"), "english", "demo")
    export.export(checkpoint, out, name="english", progress=lambda m: print(m, file=sys.stderr, flush=True))
    return out
