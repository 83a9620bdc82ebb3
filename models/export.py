"""Export a checkpoint to an ONNX directory the server loads.

    python -m models.export laya --checkpoint convaiinnovations/laya --out exports/english
    python -m models.export laya --checkpoint convaiinnovations/laya/multilingual --out exports/multilingual
    python -m models.export laya --checkpoint ./my-laya-checkpoint --out exports/mine --name mine
    python -m models.export cua-s1 --checkpoint Qwen/Qwen3.5-4B --adapter cua-ai/cua-s1-4b-0.2/text \
        --out exports/cua-s1 --dtype float16

`--checkpoint` is a local directory in the published layout or a Hugging Face repo id
(optionally with a subfolder), downloaded with huggingface_hub (`--revision` pins a commit;
HF_TOKEN for gated repos). Re-running with unchanged sources is a no-op.

`--publish DIR` instead of `--out` writes a versioned export, DIR/<version>/, and points
DIR/current at it once complete (models/publish.py): what deploy/export.sh does, so that servers
load a complete export or none and old and new servers serve side by side during a rollout.

Exit status: 0 exported (or up to date); 2 the checkpoint cannot be had, or the options are
refused; 3 a half-precision graph failed its parity gate, or the gate cannot run here (a float32
export needs none: deploy/export.sh exports float32 then); 4 the export would not fit
its server's memory (nothing is written): `--memory-limit`, and the memory of the GPU the export
runs on where it sees one, since the shipped stacks export on a GPU of the kind that serves (hide
the GPU, `CUDA_VISIBLE_DEVICES=`, to export on one for a server without); 1 anything else.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import sys

from models import export_dir, gdn_plan, publish
from models.hub import CheckpointUnavailable
from models.precision import GateFailed

GATE_FAILED = 3
DOES_NOT_FIT = 4
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}


def memory_size(text: str) -> int:
    """Bytes, from a number with an optional unit as Kubernetes writes them (64Gi, 80G, 1000)."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError("%r is not a memory size (bytes, or 64Gi, 80G...)" % text)
    number, unit = match.groups()
    return int(float(number) * _UNITS[unit.lower()])


def gpu_memory() -> tuple[int, str] | None:
    """The memory of the GPU this export runs on, and its name; None where torch sees no GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    return int(props.total_memory), "the memory of %s, the GPU this export runs on" % props.name


def serving_limit(given: int | None) -> tuple[int | None, str]:
    """The memory the export's server has, and what says so: the smaller of `given`
    (--memory-limit: the pod's limit, say) and the GPU's; (None, "") where neither is known."""
    known = [(given, "--memory-limit, OMNI_EXPORT_MEMORY_LIMIT")] if given is not None else []
    known += [gpu] if (gpu := gpu_memory()) else []
    return min(known, default=(None, ""))


EXPORTERS = {
    "laya": "models.laya.export",
    "cua-s1": "models.cua_s1.export",
    "open-jev": "models.open_jev.export",
    "clef-flash": "models.clef_flash.export",
}
# Options only the Qwen3.5-backbone families take.
QWEN_OPTIONS = ("adapter", "base", "gdn_kernel", "gdn_plan", "max_length", "records")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m models.export", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("model", choices=sorted(EXPORTERS))
    ap.add_argument("--checkpoint", required=True, help="local directory or owner/name[/subfolder]")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", help="directory to write the export to")
    where.add_argument(
        "--publish",
        metavar="DIR",
        help="write the export to DIR/<version>/ (checkpoint commit or content hash, exporter "
        "version, options) and point DIR/current at it once complete",
    )
    ap.add_argument("--revision", help="commit, branch or tag of a Hub checkpoint")
    ap.add_argument("--subfolder", help="checkpoint subfolder inside the repo or directory")
    ap.add_argument("--name", help="served model name (default: the checkpoint's variant)")
    ap.add_argument("--force", action="store_true", help="export even when up to date")
    ap.add_argument(
        "--memory-limit",
        type=memory_size,
        help="the memory the export's server has (the pod's limit: bytes, 64Gi, 80G), capped by the "
        "GPU's where the export sees one: an export whose weights plus %d%% exceed it is refused "
        "before anything is written (exit status %d)" % (round(export_dir.SERVING_MARGIN * 100), DOES_NOT_FIT),
    )
    ap.add_argument(
        "--dtype",
        choices=["float32", "float16", "bfloat16"],
        help="weights and compute dtype of the graph (default float32; Laya: float32 or float16). "
        "A half-precision graph is gated against float32 at export, on CUDA where ONNX Runtime "
        "has it",
    )
    # Deep random-weight stacks amplify rounding past the gate: benchmarks export them with record.
    ap.add_argument(
        "--parity-gate",
        choices=["enforce", "record"],
        help="a half-precision graph that fails the gate (probability drift > 0.02, or a top choice "
        "changed where float32's margin is >= 0.05): enforce (default) refuses the export; record "
        "exports it and records the failure in the manifest (random-weight benchmark checkpoints)",
    )
    qwen = ap.add_argument_group("Qwen3.5-backbone models (cua-s1, open-jev, clef-flash)")
    qwen.add_argument("--adapter", help="PEFT LoRA adapter merged at export: local dir or owner/name[/sub]")
    qwen.add_argument("--base", help="open-jev: the base checkpoint (default: the one model.json names)")
    qwen.add_argument("--max-length", type=int, help="open-jev: tokens per candidate (default 4096, at most 16384)")
    # The portable kernel, or the faster CUDA-only one: where the export will be served decides.
    qwen.add_argument(
        "--gdn-kernel",
        choices=["linear_attention", "gated_delta_net_fused"],
        help="ONNX Runtime kernel for the Gated DeltaNet layers: linear_attention (default; CPU and "
        "CUDA) or gated_delta_net_fused (CUDA only, faster)",
    )
    # The engines round differently: the half-precision gate runs the one the server will.
    qwen.add_argument(
        "--gdn-plan",
        choices=gdn_plan.PLANS,
        help="the GatedDeltaNet engine the parity gate runs the export on: the server's "
        "OMNI_CUDA_GDN_PLAN (default %s)" % gdn_plan.DEFAULT,
    )
    # Kept for clients of the published one-record signature.
    qwen.add_argument(
        "--records",
        choices=["batched", "single"],
        help="clef-flash: several records a pass as rows of one batch (batched, default: more "
        "requests a second under load), or the published clef-joint-v1 signature, one record "
        "a pass (single)",
    )
    args = ap.parse_args(argv)
    exporter = importlib.import_module(EXPORTERS[args.model])

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        extra = {k: getattr(args, k) for k in QWEN_OPTIONS if getattr(args, k) is not None}
        # An option the model's exporter does not take is refused, never dropped: a --base or
        # --adapter given to the wrong family must not export something else than asked.
        takes = inspect.signature(exporter.export).parameters
        for option in extra:
            if option not in takes:
                ap.error("--%s does not apply to %s" % (option.replace("_", "-"), args.model))
        if args.publish and args.force:
            ap.error("--force applies to --out: a published version is never rewritten")
        if args.model == "laya" and args.dtype == "bfloat16":
            ap.error("Laya exports in float32 or float16")
        if args.dtype:
            extra["dtype"] = args.dtype
        if args.parity_gate:
            extra["parity_gate"] = args.parity_gate

        limit, source = serving_limit(args.memory_limit)

        def run(out: str) -> None:
            with export_dir.memory_budget(limit, source):
                exporter.export(
                    args.checkpoint,
                    out,
                    revision=args.revision,
                    subfolder=args.subfolder,
                    name=args.name,
                    force=args.force,
                    progress=progress,
                    **extra,
                )

        if args.out:
            run(args.out)
        else:
            identity = publish.source_identity(args.checkpoint, args.revision, args.subfolder)
            options = {"family": args.model, "checkpoint": args.checkpoint, "subfolder": args.subfolder}
            options.update(name=args.name, **extra)
            publish.publish(args.publish, publish.version(identity, options), run, progress)
    except CheckpointUnavailable as exc:
        print("error: %s" % exc, file=sys.stderr)
        return 2
    except GateFailed as exc:
        print("error: %s" % exc, file=sys.stderr)
        return GATE_FAILED
    except export_dir.DoesNotFit as exc:
        print("error: %s" % exc, file=sys.stderr)
        return DOES_NOT_FIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
