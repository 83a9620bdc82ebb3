"""The demo model `make serve` falls back to: a random-weight Laya english checkpoint in the
published layout, exported once (export-time dependencies: torch, transformers, onnx).

    python -m models.demo ROOT      # prints the export directory, building it on first use

The server's launcher runs this as a child process, so serving never imports the exporters.
"""

from __future__ import annotations

import os
import sys

# The exit status when the export extra (torch, transformers, onnx) is not installed.
NO_EXPORT_EXTRA = 3


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


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m models.demo ROOT", file=sys.stderr)
        return 2
    try:
        print(ensure_demo(argv[0]))
    except ImportError as exc:
        print("the demo cannot be built here (%s): install the `export` extra" % exc, file=sys.stderr)
        return NO_EXPORT_EXTRA
    return 0


if __name__ == "__main__":
    sys.exit(main())
