"""Cua-S1 4B 0.2 checkpoint facts: identity, the `text` LoRA adapter and the merged-export marker.

Public:
    IDENTITY, BASE, MODEL_NAME, LETTERS, LETTER_IDS, EXPORT_MARKER, EXPORT_FORMAT
    letter_token_ids(tokenizer) -> list[int]
    full_attention_layers(layer_types) -> list[int]
    resolve_adapter(path, layer_types=None) -> Adapter        # raises AdapterError
    export_marker(adapter=None, **extra) -> dict
    write_export_marker(directory, adapter=None, **extra) -> dict
    read_export_marker(directory) -> dict                     # raises ValueError

The adapter repo holds two independent adapters, `text/` and `multimodal/` (models.md §3). Only
`text/` fits the text-only backbone we export: the multimodal one targets the vision tower too
and names its language keys for the image-text model, so PEFT would only *warn* about the keys
it cannot place. We refuse it up front instead. Reading the config and the tensor names needs
no torch (safetensors is read with numpy); an `adapter_model.bin` needs torch to list its keys.
"""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass, field

from models.cua_s1.identity import (
    ADAPTER_REPO,
    ADAPTER_REVISION,
    BASE,
    BASE_REPO,  # noqa: F401 (re-exported: the checkpoint's public names)
    BASE_REVISION,  # noqa: F401
    FAMILY,  # noqa: F401
    IDENTITY,
    LETTER_IDS,
    LETTERS,
    MODALITY,
    MODEL_NAME,
)

ATTENTION_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")  # full-attention layers only
MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")  # every layer's MLP
TARGETS = frozenset(ATTENTION_TARGETS + MLP_TARGETS)
# What only the multimodal adapter has: vision-tower MLP targets, image-text key names.
_MULTIMODAL_TARGETS = ("linear_fc1", "linear_fc2")
_MULTIMODAL_KEY = re.compile(r"(^|\.)model\.(language_model|visual)\.")
# A text adapter key: `base_model.model.model.layers.{i}.{self_attn|mlp}.{module}.lora_{A|B}.weight`.
_LORA_KEY = re.compile(r"^base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")

EXPORT_MARKER = "cua_s1_export.json"
EXPORT_FORMAT = "cua-s1-text-merged/1"


class AdapterError(ValueError):
    """The folder is not the Cua-S1 `text` adapter (or not one we can merge exactly)."""


def letter_token_ids(tokenizer) -> list[int]:
    """Ids of A..Z from a `tokenizers.Tokenizer`; each letter must be a single token."""
    ids = [tokenizer.token_to_id(c) for c in LETTERS]
    missing = [c for c, i in zip(LETTERS, ids, strict=True) if i is None]
    if missing:
        raise ValueError("tokenizer has no single-token letter %s" % ", ".join(missing))
    return ids


def full_attention_layers(layer_types) -> list[int]:
    return [i for i, t in enumerate(layer_types) if t == "full_attention"]


@dataclass(frozen=True)
class Adapter:
    """A resolved `text/` adapter."""

    directory: str
    weights: str  # the weights file, whatever it is named
    r: int
    alpha: float
    scale: float  # alpha / r (alpha / sqrt(r) under rsLoRA): W' = W + scale·B·A
    targets: tuple[str, ...]  # module names as adapter_config.json gives them (sorted)
    layers: int  # decoder layers the adapter covers
    attention_layers: tuple[int, ...] = field(default=())

    def summary(self) -> dict:
        return {
            "r": self.r,
            "alpha": self.alpha,
            "scale": self.scale,
            "targets": list(self.targets),
            "weights": os.path.basename(self.weights),
        }


def _read_config(directory: str) -> dict:
    path = os.path.join(directory, "adapter_config.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise AdapterError("%s: cannot read adapter_config.json (%s)" % (directory, exc)) from exc


def _weights_file(directory: str) -> str:
    """adapter_model.safetensors / .bin, else the one *.safetensors or *.bin the folder holds."""
    for name in ("adapter_model.safetensors", "adapter_model.bin"):
        if os.path.isfile(os.path.join(directory, name)):
            return os.path.join(directory, name)
    for ext in ("safetensors", "bin"):
        found = sorted(glob.glob(os.path.join(directory, "*." + ext)))
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise AdapterError(
                "%s holds several .%s files and no adapter_model.%s; which are the "
                "adapter weights?" % (directory, ext, ext)
            )
    raise AdapterError("%s has adapter_config.json but no weights file (.safetensors or .bin)" % directory)


def _weight_shapes(path: str) -> dict[str, tuple[int, ...]]:
    if path.endswith(".safetensors"):
        from safetensors import safe_open

        with safe_open(path, framework="numpy") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118 - safe_open
    import torch  # a pickled .bin: only torch reads it (weights_only keeps it data-only)

    state = torch.load(path, map_location="cpu", weights_only=True)
    return {k: tuple(v.shape) for k, v in state.items()}


def _targets(config: dict) -> tuple[str, ...]:
    raw = config.get("target_modules")
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, (list, tuple)) and all(isinstance(t, str) for t in raw):
        return tuple(sorted(raw))
    raise AdapterError("adapter_config.json: target_modules must be a list of names or a regex, got %r" % (raw,))


def _is_multimodal(config: dict, keys) -> bool:
    raw = config.get("target_modules")
    names = [raw] if isinstance(raw, str) else list(raw or [])
    return any(m in str(n) for n in names for m in _MULTIMODAL_TARGETS) or any(_MULTIMODAL_KEY.search(k) for k in keys)


def _check_config(directory: str, config: dict) -> tuple[int, float, float]:
    if config.get("peft_type", "LORA") != "LORA":
        raise AdapterError("%s: peft_type %r; the Cua-S1 text adapter is a LoRA" % (directory, config.get("peft_type")))
    # Anything that changes the merge away from `W + scale·B·A` per module is not the adapter we know.
    for key in (
        "use_dora",
        "lora_bias",
        "fan_in_fan_out",
        "modules_to_save",
        "rank_pattern",
        "alpha_pattern",
        "layers_to_transform",
        "target_parameters",
        "trainable_token_indices",
    ):
        if config.get(key):
            raise AdapterError(
                "%s: adapter_config.json sets %s=%r, which the text adapter does not use"
                % (directory, key, config[key])
            )
    if config.get("bias", "none") != "none":
        raise AdapterError("%s: adapter trains biases (bias=%r)" % (directory, config["bias"]))
    r, alpha = config.get("r"), config.get("lora_alpha")
    if not isinstance(r, int) or isinstance(r, bool) or r < 1 or not isinstance(alpha, (int, float)):
        raise AdapterError(
            "%s: adapter_config.json needs integer r >= 1 and numeric lora_alpha, got r=%r "
            "lora_alpha=%r" % (directory, r, alpha)
        )
    scale = alpha / r**0.5 if config.get("use_rslora") else alpha / r
    return r, float(alpha), float(scale)


def _check_targets(
    directory: str, targets: tuple[str, ...], shapes: dict, r: int, layer_types
) -> tuple[int, tuple[int, ...]]:
    """Targets must be q/k/v/o in full-attention layers and gate/up/down in every MLP, nothing else."""
    if len(targets) == 1 and targets[0] not in TARGETS:
        pattern = re.compile(targets[0])  # PEFT full-matches a string target against module names
        hits = {
            t
            for t in TARGETS
            if pattern.fullmatch("model.layers.3.%s.%s" % ("self_attn" if t in ATTENTION_TARGETS else "mlp", t))
        }
        if hits != TARGETS:
            raise AdapterError(
                "%s: target_modules regex %r does not select exactly %s"
                % (directory, targets[0], ", ".join(sorted(TARGETS)))
            )
    elif set(targets) != TARGETS:
        raise AdapterError(
            "%s: target_modules %s; the text adapter targets exactly %s"
            % (directory, ", ".join(targets), ", ".join(sorted(TARGETS)))
        )
    seen: dict[tuple[int, str], set] = {}
    for key, shape in shapes.items():
        m = _LORA_KEY.match(key)
        if not m:
            raise AdapterError("%s: unexpected tensor %r in the adapter weights" % (directory, key))
        layer, block, module, ab = int(m[1]), m[2], m[3], m[4]
        if module not in TARGETS or (block == "self_attn") != (module in ATTENTION_TARGETS):
            raise AdapterError(
                "%s: tensor %r adapts %s.%s, which the text adapter leaves alone" % (directory, key, block, module)
            )
        if len(shape) != 2 or (shape[0] if ab == "A" else shape[1]) != r:
            raise AdapterError("%s: tensor %r has shape %s, not rank %d" % (directory, key, list(shape), r))
        seen.setdefault((layer, module), set()).add(ab)
    if not seen:
        raise AdapterError("%s: the adapter weights hold no LoRA tensors" % directory)
    incomplete = sorted(k for k, v in seen.items() if v != {"A", "B"})
    if incomplete:
        raise AdapterError("%s: LoRA pairs without both A and B: %s" % (directory, incomplete))
    layers = len(layer_types) if layer_types is not None else max(layer for layer, _ in seen) + 1
    types = (
        list(layer_types)
        if layer_types is not None
        else ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)]
    )
    attention = full_attention_layers(types)
    expected = {(i, t) for i in range(layers) for t in MLP_TARGETS} | {
        (i, t) for i in attention for t in ATTENTION_TARGETS
    }
    if set(seen) != expected:
        missing, extra = sorted(expected - set(seen)), sorted(set(seen) - expected)
        raise AdapterError(
            "%s: adapted modules differ from q/k/v/o in full-attention layers %s and "
            "gate/up/down in all %d MLPs (missing %s, unexpected %s)"
            % (directory, attention, layers, missing[:6], extra[:6])
        )
    return layers, tuple(attention)


def resolve_adapter(path: str, layer_types=None) -> Adapter:
    """The `text/` adapter at `path`: the adapter folder itself, or the repo folder holding `text/`.

    `layer_types` (the base's, e.g. `TextDims.layer_types`) pins which layers are full attention;
    without it the Qwen3.5 rule `(i+1) % 4 == 0` is assumed over the layers the adapter covers.
    """
    directory = path
    if not os.path.isfile(os.path.join(directory, "adapter_config.json")):
        if os.path.isfile(os.path.join(path, "text", "adapter_config.json")):
            directory = os.path.join(path, "text")
        else:
            raise AdapterError("%s is not a PEFT adapter folder and has no text/ adapter" % path)
    config = _read_config(directory)
    weights = _weights_file(directory)
    shapes = _weight_shapes(weights)
    if _is_multimodal(config, shapes):
        raise AdapterError(
            "%s is the multimodal adapter (linear_fc1/linear_fc2 targets, "
            "model.language_model.* keys); serve the text/ adapter next to it" % directory
        )
    r, alpha, scale = _check_config(directory, config)
    targets = _targets(config)
    layers, attention = _check_targets(directory, targets, shapes, r, layer_types)
    return Adapter(directory, weights, r, alpha, scale, targets, layers, attention)


def export_marker(adapter: Adapter | None = None, **extra) -> dict:
    """The marker's content: its format, what was merged into what, plus `extra` fields."""
    marker = {
        "format": EXPORT_FORMAT,
        "model": MODEL_NAME,
        "identity": IDENTITY,
        "base": BASE,
        "adapter": ADAPTER_REPO,
        "adapter_revision": ADAPTER_REVISION,
        "modality": MODALITY,
        "letters": LETTERS,
        "letter_token_ids": list(LETTER_IDS),
    }
    if adapter is not None:
        marker["lora"] = adapter.summary()
    marker.update(extra)
    return marker


def write_export_marker(directory: str, adapter: Adapter | None = None, **extra) -> dict:
    """Write `cua_s1_export.json` into a merged export. Write it last: its presence says the
    export is complete (a folder without it may hold the base model alone)."""
    marker = export_marker(adapter, **extra)
    tmp = os.path.join(directory, EXPORT_MARKER + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(marker, f, indent=2)
    os.replace(tmp, os.path.join(directory, EXPORT_MARKER))
    return marker


def read_export_marker(directory: str) -> dict:
    path = os.path.join(directory, EXPORT_MARKER)
    if not os.path.isfile(path):
        raise ValueError("%s has no %s: not a merged Cua-S1 text export" % (directory, EXPORT_MARKER))
    with open(path, encoding="utf-8") as f:
        marker = json.load(f)
    if not isinstance(marker, dict) or marker.get("format") != EXPORT_FORMAT:
        raise ValueError(
            "%s: format %r, expected %r"
            % (path, marker.get("format") if isinstance(marker, dict) else marker, EXPORT_FORMAT)
        )
    return marker
