"""Rendering JSON values into prompt text with Python `json` semantics (models.md §1.2).

The exact text decides the tokens, so every model renders with the stdlib encoder; each model
picks its separators / key order. Strings always pass through unchanged.
"""

from __future__ import annotations

import json
from typing import Any


def render(value: Any, *, separators: tuple[str, str] | None = None, sort_keys: bool = False, default=None) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=separators, sort_keys=sort_keys, default=default)


def json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words, for problem details: "null", "a boolean",
    "a number", "a string", "an array" or "an object"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "a value JSON does not have"


def json_key(key: Any) -> str:
    """The string a JSON object key becomes when Python's `json` encodes a dict with it."""
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, float):
        return float.__repr__(key)
    return str(key)
