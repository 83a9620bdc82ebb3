"""Open-Jev checkpoint facts: the pinned variants, the names a request may use, the upstream
package layout, and the merged-export metadata `open_jev_export.json` (models.md §4.1).

    VARIANTS["9b"] / VARIANTS["27b-v1.1"]               -> Variant
    variant_for(model_id, base_revision=None)         -> Variant
    read_package(path)                                -> Package
    chat_parts(tokenizer)                             -> (chat_prefix, chat_suffix)   (a transformers tokenizer)
    write_export_metadata(directory, meta)            -> path
    read_export_metadata(directory)                   -> MergedExport

Reading the package's scalar head (`head.pt`, torch) is head.py's, at export; serving reads
nothing but the JSON metadata.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np

FAMILY = "open_jev"
EXPORT_FILE = "open_jev_export.json"
EXPORT_FORMAT = "open-jev-text-merged/1"
MAX_LENGTH_DEFAULT = 4096
MAX_LENGTH_LIMIT = 16384
# Names every Open-Jev serves besides its own: upstream's wire-compatibility aliases.
GENERIC_NAMES = ("open-jev", "jev-latest")
# The single-user Qwen chat template with add_generation_prompt=True, enable_thinking=False,
# split around the user text (what upstream's export derives from the tokenizer).
CHAT_PREFIX = "<|im_start|>user\n"
CHAT_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
PACKAGE_FILES = ("model.json", "temperature.json", "head.pt", "adapter")


@dataclass(frozen=True)
class Variant:
    name: str  # upstream's name for the checkpoint
    alias: str  # the served name
    repo: str  # Hugging Face repo of the upstream package
    revision: str  # its pinned commit
    model_id: str  # the base model; also the response `model`
    base_revision: str
    temperature: float  # the published calibration, for reference and random packages
    backbone: tuple[int, ...]  # hidden, FFN, layers, heads, KV heads, linear K heads, linear V heads
    pack_candidates: bool  # candidates may share one batch (upstream allows it on 27B only)

    @property
    def hidden_size(self) -> int:
        return self.backbone[0]

    @property
    def base_id(self) -> str:
        return "%s@%s" % (self.model_id, self.base_revision)

    @property
    def names(self) -> tuple[str, ...]:
        """What a request's `model` may say (besides null / absent)."""
        return (self.alias, self.model_id, self.base_id, *GENERIC_NAMES)

    def serves(self, model) -> bool:
        """Whether a request's `model` names this variant. Case-insensitive, like the app's
        registry, so a name the registry routed here is never refused here."""
        if model is None:
            return True
        if not isinstance(model, str):
            return False
        key = model.strip().lower()
        return any(key == n.lower() for n in self.names)


VARIANTS = {
    "27b-v1.1": Variant(
        name="Open-Jev-27B-v1.1",
        alias="open-jev-27b-v1.1",
        repo="ZefanCai/Open-Jev-27B-v1.1",
        revision="28cf73067d5b337860bbef3c85b8b82ba8730956",
        model_id="Qwen/Qwen3.8-27B",
        base_revision="1d4bf0f2ff6012fd82039f2fa52739d0dd7c60c0",
        temperature=2.5343690298472983,
        backbone=(5120, 17408, 64, 24, 4, 16, 48),
        pack_candidates=True,
    ),
    "9b": Variant(
        name="Open-Jev-9B",
        alias="open-jev-9b",
        repo="ZefanCai/Open-Jev-9B",
        revision="47e966881e489511c0c7f5633a9e1960a676a551",
        model_id="Qwen/Qwen3.5-9B",
        base_revision="c202236235762e1c871ad0ccb60c8ee5ba337b9a",
        temperature=1.8969118766347646,
        backbone=(4096, 12288, 32, 16, 4, 16, 32),
        pack_candidates=False,
    ),
}


def variant_for(model_id: str, base_revision: str | None = None) -> Variant:
    """The variant fine-tuned from `model_id` (at `base_revision`, when given)."""
    for variant in VARIANTS.values():
        if variant.model_id == model_id:
            if base_revision is not None and base_revision != variant.base_revision:
                raise ValueError(
                    "%s is pinned to base revision %s, got %s" % (variant.name, variant.base_revision, base_revision)
                )
            return variant
    raise ValueError(
        "no Open-Jev variant is built on %r (known: %s)" % (model_id, ", ".join(v.model_id for v in VARIANTS.values()))
    )


def _positive_temperature(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError("%s: temperature must be a finite positive number, got %r" % (where, value))
    return float(value)


def _read_json(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError("%s must hold a JSON object" % path)
    return data


@dataclass(frozen=True)
class Package:
    """An upstream `package/checkpoint/` directory."""

    path: str
    model_id: str  # the base model it was trained on (model.json)
    base_revision: str
    temperature: float  # temperature.json
    variant: Variant

    @property
    def head_path(self) -> str:
        return os.path.join(self.path, "head.pt")

    @property
    def adapter_path(self) -> str:
        return os.path.join(self.path, "adapter")


def read_package(path: str) -> Package:
    """Check the layout and read the small JSON files; the weights are left to the exporter."""
    missing = [n for n in PACKAGE_FILES if not os.path.exists(os.path.join(path, n))]
    if missing:
        raise FileNotFoundError("%s is not an Open-Jev checkpoint package: no %s" % (path, ", ".join(missing)))
    if not os.path.exists(os.path.join(path, "adapter", "adapter_config.json")):
        raise FileNotFoundError("%s/adapter is not a PEFT adapter: no adapter_config.json" % path)
    model = _read_json(os.path.join(path, "model.json"))
    model_id, revision = model.get("model_id"), model.get("revision")
    if not isinstance(model_id, str) or not isinstance(revision, str):
        raise ValueError('%s/model.json must name the base as {"model_id", "revision"}' % path)
    temperature = _positive_temperature(
        _read_json(os.path.join(path, "temperature.json")).get("temperature"), path + "/temperature.json"
    )
    return Package(path, model_id, revision, temperature, variant_for(model_id, revision))


def chat_parts(tokenizer) -> tuple[str, str]:
    """(prefix, suffix) around one user message, from a transformers tokenizer's chat template.

    Upstream's export renders a marker through the template; anything but a single-user text
    template (the marker missing or repeated) is refused.
    """
    marker = "\x00OMNI_OPEN_JEV\x00"
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": marker}], tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    if chat.count(marker) != 1:
        raise ValueError("expected a single-user text chat template")
    prefix, suffix = chat.split(marker)
    return prefix, suffix


@dataclass(frozen=True)
class MergedExport:
    """What serving needs from `open_jev_export.json`, besides the backbone and tokenizer."""

    model_id: str
    base_revision: str
    checkpoint_revision: str | None
    temperature: float
    max_length: int
    chat_prefix: str
    chat_suffix: str
    head_weight: np.ndarray  # float32 [H]
    head_bias: float  # a float32 value

    @property
    def variant(self) -> Variant:
        return variant_for(self.model_id, self.base_revision)

    def as_json(self) -> dict:
        return {
            "format": EXPORT_FORMAT,
            "model_id": self.model_id,
            "base_revision": self.base_revision,
            "checkpoint_revision": self.checkpoint_revision,
            "temperature": self.temperature,
            "max_length": self.max_length,
            "chat_prefix": self.chat_prefix,
            "chat_suffix": self.chat_suffix,
            # float32 values written as doubles: repr round-trips them exactly.
            "head_weight": [float(v) for v in self.head_weight],
            "head_bias": float(self.head_bias),
        }


def check_max_length(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LENGTH_LIMIT:
        raise ValueError("max_length must be an integer within 1..=%d, got %r" % (MAX_LENGTH_LIMIT, value))
    return value


def write_export_metadata(directory: str, meta: MergedExport) -> str:
    """Write `open_jev_export.json`. Call it last: its presence marks a complete export."""
    path = os.path.join(directory, EXPORT_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(meta.as_json(), allow_nan=False, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def read_export_metadata(directory: str) -> MergedExport:
    """Read and check `open_jev_export.json`; refuses other formats and unpinned bases."""
    path = os.path.join(directory, EXPORT_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError("%s has no %s: not a complete Open-Jev merged export" % (directory, EXPORT_FILE))
    data = _read_json(path)
    if data.get("format") != EXPORT_FORMAT:
        raise ValueError("%s: expected format %r, got %r" % (path, EXPORT_FORMAT, data.get("format")))
    variant = variant_for(data.get("model_id"), data.get("base_revision"))
    prefix, suffix = data.get("chat_prefix"), data.get("chat_suffix")
    if not isinstance(prefix, str) or not isinstance(suffix, str):
        raise ValueError("%s: chat_prefix and chat_suffix must be strings" % path)
    raw_weight, raw_bias = data.get("head_weight"), data.get("head_bias")
    if (
        not isinstance(raw_weight, list)
        or not raw_weight
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw_weight)
        or isinstance(raw_bias, bool)
        or not isinstance(raw_bias, (int, float))
    ):
        raise ValueError("%s: head_weight must be a list of numbers and head_bias a number" % path)
    # Rounded to float32 as the native worker loads them (exact for what export wrote).
    with np.errstate(over="ignore"):
        weight = np.asarray(raw_weight, dtype=np.float64).astype(np.float32)
        bias = float(np.float32(raw_bias))
    if not np.isfinite(weight).all() or not math.isfinite(bias):
        raise ValueError("%s: non-finite scalar head" % path)
    revision = data.get("checkpoint_revision")
    return MergedExport(
        model_id=variant.model_id,
        base_revision=variant.base_revision,
        checkpoint_revision=revision if isinstance(revision, str) else None,
        temperature=_positive_temperature(data.get("temperature"), path),
        max_length=check_max_length(data.get("max_length", MAX_LENGTH_DEFAULT)),
        chat_prefix=prefix,
        chat_suffix=suffix,
        head_weight=weight,
        head_bias=bias,
    )
