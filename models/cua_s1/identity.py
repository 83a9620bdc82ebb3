"""Cua-S1 4B 0.2's identity: its names, the pinned adapter and base, and the answer letters.
What the served modules need of the checkpoint; reading and checking it is checkpoint.py's.
"""

from __future__ import annotations

FAMILY = "cua_s1"
MODEL_NAME = "cua-s1-4b-0.2"
ADAPTER_REPO = "cua-ai/cua-s1-4b-0.2"
ADAPTER_REVISION = "16818868b0cc7813808aae4e87b417657046ab79"
MODALITY = "text"
# Upstream's identity format `<repo>@<adapter revision>:<modality>`: the response `model`
# and what /health reports (§3.3).
IDENTITY = "%s@%s:%s" % (ADAPTER_REPO, ADAPTER_REVISION, MODALITY)
BASE_REPO = "Qwen/Qwen3.5-4B"
BASE_REVISION = "851bf6e806efd8d0a36b00ddf55e13ccb7b8cd0a"
BASE = "%s@%s" % (BASE_REPO, BASE_REVISION)

# Options are lettered A..Z in request order; each letter is one token, ids 32..57 in the
# Qwen vocabulary (the byte alphabet comes first, in GPT-2 order).
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
LETTER_IDS = tuple(range(32, 58))
