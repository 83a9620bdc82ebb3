"""Cua-S1 4B 0.2 (`text` adapter): Qwen3.5-4B with a merged LoRA, read out on the letters A–Z.

identity (names, pins, letters) · checkpoint (adapter resolution, export marker) · prepare (request → one prompt row per
question) · finish (letter logits → choice answers) · random_checkpoint (test checkpoints).
"""

from __future__ import annotations

from models.cua_s1.identity import FAMILY, IDENTITY, MODEL_NAME

__all__ = ["FAMILY", "IDENTITY", "MODEL_NAME"]
