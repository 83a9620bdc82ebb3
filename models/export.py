"""Export a checkpoint to an ONNX directory the server loads.

    python -m models.export laya --checkpoint convaiinnovations/laya --out exports/english
    python -m models.export laya --checkpoint convaiinnovations/laya/multilingual --out exports/multilingual
    python -m models.export laya --checkpoint ./my-laya-checkpoint --out exports/mine --name mine

`--checkpoint` is a local directory in the published layout or a Hugging Face repo id
(optionally with a subfolder), downloaded with huggingface_hub (`--revision` pins a commit;
HF_TOKEN for gated repos). Re-running with unchanged sources is a no-op.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from models.hub import CheckpointUnavailable

EXPORTERS = {"laya": "models.laya.export"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m models.export", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", choices=sorted(EXPORTERS))
    ap.add_argument("--checkpoint", required=True, help="local directory or owner/name[/subfolder]")
    ap.add_argument("--out", required=True, help="directory to write the export to")
    ap.add_argument("--revision", help="commit, branch or tag of a Hub checkpoint")
    ap.add_argument("--subfolder", help="checkpoint subfolder inside the repo or directory")
    ap.add_argument("--name", help="served model name (default: the checkpoint's variant)")
    ap.add_argument("--force", action="store_true", help="export even when up to date")
    args = ap.parse_args(argv)
    exporter = importlib.import_module(EXPORTERS[args.model])

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        exporter.export(args.checkpoint, args.out, revision=args.revision, subfolder=args.subfolder,
                        name=args.name, force=args.force, progress=progress)
    except CheckpointUnavailable as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
