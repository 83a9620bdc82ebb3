"""The export directory an exporter writes: skipped when up to date, built in a scratch folder
that replaces the old files only on success, and finished by its manifest (models/manifest.py),
written last. Export-time only: the server reads manifests, never this module.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from typing import Any

from models import manifest as manifests
from models.fold import fold_export
from models.placement import host_arithmetic

# Serving memory of an export: its weights plus this share for ONNX Runtime's arena, activations
# and CUDA graphs (the benchmarked models take 1.04-1.10x their weights once loaded, docs/benchmarks.md).
SERVING_MARGIN = 0.2
# The memory the export's server has (bytes) while a `memory_budget` block runs, and what says so
# (`python -m models.export`: --memory-limit, the GPU it runs on): an export that would not fit is
# refused before it writes anything.
_memory_limit: tuple[int, str] | None = None


@contextlib.contextmanager
def memory_budget(limit: int | None, source: str = "--memory-limit, OMNI_EXPORT_MEMORY_LIMIT"):
    """Exports inside the block are refused past `limit` bytes of serving memory (None: no limit),
    the refusal naming `source`, where the limit comes from."""
    global _memory_limit
    saved, _memory_limit = _memory_limit, (None if limit is None else (limit, source))
    try:
        yield
    finally:
        _memory_limit = saved


class DoesNotFit(RuntimeError):
    """An export the server it is for could not hold."""


def check_fits(module, what: str = "export", progress=None) -> int:
    """The serving memory of exporting `module` as it is (its parameters and buffers, in their
    dtypes, plus SERVING_MARGIN); raises DoesNotFit, before anything is written, past the
    `memory_budget` it runs in."""
    tensors = list(module.parameters()) + list(module.buffers())
    weights = sum(t.numel() * t.element_size() for t in tensors)
    need = int(weights * (1 + SERVING_MARGIN))
    if _memory_limit is not None and need > _memory_limit[0]:
        limit, source = _memory_limit
        raise DoesNotFit(
            "the %s needs about %s to serve (weights %s + %d%%), past the memory limit of %s "
            "(%s): nothing written"
            % (what, _gib(need), _gib(weights), round(SERVING_MARGIN * 100), _gib(limit), source)
        )
    if progress:
        progress("      serving memory ~%s (weights %s)" % (_gib(need), _gib(weights)))
    return need


def _gib(n: int) -> str:
    return "%.3g GiB" % (n / 2**30) if n >= 2**20 else "%d bytes" % n


def up_to_date(
    directory: str, family: str, sources: dict[str, str], options: dict[str, Any], parity_gate: str = "enforce"
) -> bool:
    """Whether `directory` already holds this export of these sources with these options. An
    export that failed its parity gate (written under `record`) is not up to date for an
    `enforce` run, which exports again and refuses it."""
    try:
        old = manifests.read(directory)
    except (FileNotFoundError, ValueError):
        return False
    if (
        old.get("family") != family
        or old.get("exporter", {}).get("version") != manifests.EXPORTER_VERSION
        or old.get("source", {}).get("sha256") != sources
        or old.get("export_options") != options
    ):
        return False
    gate = old.get("check", {}).get("parity_gate")
    if parity_gate == "enforce" and gate is not None and not gate.get("passes"):
        return False
    outputs = old.get("files", {})
    return bool(outputs) and all(os.path.exists(os.path.join(directory, n)) for n in outputs)


def reuse(directory: str, progress) -> dict[str, Any]:
    """The manifest of an up-to-date export, its weights folded first where its manifest does
    not say they are (models.fold: in place, far quicker than exporting again)."""
    log = progress or (lambda msg: None)
    meta = manifests.read(directory)
    if meta.get("weights_folded"):
        log("up to date: %s (nothing to do)" % directory)
        return meta
    fold_export(directory, log)
    log("up to date: %s (its weight layouts folded now)" % directory)
    return manifests.read(directory)


def flagged_random(*config_paths: str) -> bool:
    """Whether any of these JSON files says `random_weights: true` (the random test/demo checkpoints do)."""
    for path in config_paths:
        with open(path, encoding="utf-8") as f:
            if json.load(f).get("random_weights"):
                return True
    return False


def exporter_info(opset: int) -> dict:
    """The exporter and library versions an export was made with (export-time only)."""
    import onnx
    import torch
    import transformers

    return {
        "version": manifests.EXPORTER_VERSION,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        "opset": opset,
    }


@contextlib.contextmanager
def staged(out: str):
    """A scratch folder inside `out` to export into; on success its files replace `out`'s, so a
    failed export never leaves a half-written graph where the server would load it."""
    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, ".export-tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    yield tmp
    for name in os.listdir(tmp):
        os.replace(os.path.join(tmp, name), os.path.join(out, name))
    os.rmdir(tmp)


def copy_present(src: str, names, dst: str) -> None:
    """Copy those of `names` that exist in `src` (tokenizer files, say) into `dst`."""
    for name in names:
        if os.path.exists(os.path.join(src, name)):
            shutil.copy(os.path.join(src, name), os.path.join(dst, name))


def finalize(out: str, meta: dict[str, Any], hash_data: bool = True) -> dict[str, Any]:
    """Record the export's files (with `hash_data=False`, not the multi-GB `*.data` weights) and
    write the manifest last: its presence marks a complete export."""
    names = sorted(n for n in os.listdir(out) if n != manifests.MANIFEST and (hash_data or not n.endswith(".data")))
    meta["files"] = manifests.hash_files(out, names)
    if meta.get("onnx") and os.path.exists(os.path.join(out, meta["onnx"])):
        # Nodes ONNX Runtime would run on the CPU, which would keep it from capturing CUDA graphs:
        # the server names them at load (ExportedModel.notes).
        meta["host_arithmetic"] = [f["node"] for f in host_arithmetic(os.path.join(out, meta["onnx"]))]
    meta.setdefault("weights_folded", True)  # every exporter folds its graph (models.fold)
    manifests.write(out, meta)
    return meta
