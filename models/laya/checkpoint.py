"""Laya checkpoint facts shared by export and serving: variants, names, calibration (§2.1)."""

from __future__ import annotations

import math
import os
import warnings

FAMILY = "laya"
QTYPES = {"choice": 0, "score": 1, "noul": 2}
QTYPE_NAMES = {v: k for k, v in QTYPES.items()}

# Served names and the aliases laya's Router accepts for them.
VARIANTS = {
    "english": ("en", "laya", "default"),
    "multilingual": ("multi", "ml", "laya-multilingual"),
    "typed-decisions": ("typed", "typed_decisions", "laya-typed-decisions", "decisions"),
}
DESCRIPTIONS = {
    "english": "Laya english: ModernBERT-large decision model, 512 tokens",
    "multilingual": "Laya multilingual: mmBERT-base decision model, 1024 tokens",
    "typed-decisions": "Laya typed-decisions: ModernBERT-large fine-tuned on typed workflows, 1024 tokens",
}
BUNDLE_REPO = "convaiinnovations/laya"
CHECKPOINT_FILES = ["rl_agent_config.json", "model.safetensors", "encoder/*", "tokenizer/*"]
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]

TEMP_MIN, TEMP_MAX = 0.5, 5.0


def clamp_temperature(t) -> float:
    """laya's clamp: [0.5, 5.0]; a non-number (bool, NaN, ±inf, text) becomes 1.0."""
    if isinstance(t, bool):
        return 1.0
    try:
        t = float(t)
    except (TypeError, ValueError):
        return 1.0
    if not math.isfinite(t):
        return 1.0
    return min(TEMP_MAX, max(TEMP_MIN, t))


def calibration(config: dict) -> dict:
    """The clamped temperatures serving applies, warning about every replaced entry."""
    raw = config.get("temperature", [1.0, 1.0, 1.0])
    if not isinstance(raw, (list, tuple)) or len(raw) != 3:
        raise ValueError("temperature must be a list of 3 numbers, got %r" % (raw,))
    by_options_raw = config.get("temperature_by_options") or {}
    temperature = [clamp_temperature(t) for t in raw]
    by_options = {k: clamp_temperature(v) for k, v in by_options_raw.items()}
    replaced = [
        "%s=%r -> %g" % (name, r, a)
        for name, r, a in [("temperature[%d]" % i, r, a) for i, (r, a) in enumerate(zip(raw, temperature, strict=True))]
        + [(k, by_options_raw[k], by_options[k]) for k in by_options_raw]
        if isinstance(r, bool) or not isinstance(r, (int, float)) or float(r) != a
    ]
    if replaced:
        warnings.warn(
            "laya checkpoint ships temperatures outside [%g, %g] or not numbers; using %s"
            % (TEMP_MIN, TEMP_MAX, ", ".join(replaced)),
            RuntimeWarning,
            stacklevel=2,
        )
    return {
        "temperature": temperature,
        "temperature_by_options": by_options,
        "temperature_raw": list(raw),
        "temperature_by_options_raw": dict(by_options_raw),
    }


def temp_bucket(qtype: int, k: int) -> str:
    size = "2" if k <= 2 else "3-5" if k <= 5 else "6-10" if k <= 10 else "11+"
    return "%s:%s" % (QTYPE_NAMES[int(qtype)], size)


def infer_variant(source: str, encoder_config: dict) -> str:
    """english / multilingual / typed-decisions, from the repo or folder name, else the vocab."""
    tail = source.rstrip("/").lower()
    for variant in ("typed-decisions", "multilingual"):
        if tail.endswith(variant) or tail.endswith("laya-" + variant):
            return variant
    base = os.path.basename(tail)
    if "typed" in base:
        return "typed-decisions"
    if "multilingual" in base or encoder_config.get("vocab_size") == 256000:
        return "multilingual"
    return "english"
