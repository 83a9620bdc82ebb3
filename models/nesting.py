"""One bound on how deeply a request's JSON may nest, the same for every model.

Models render and walk what a request holds recursively (`json.dumps`, their own walks), so a body
nested a few hundred levels deep would parse and then fail on Python's recursion limit. The body
path (app/body.py) refuses anything deeper than `MAX_NESTING` before a model sees it.
"""

from __future__ import annotations

from typing import Any

# Levels of objects and arrays, the body itself being the first: far past what a state or a
# question needs, far below what rendering can take.
MAX_NESTING = 64


def nests_deeper(value: Any, limit: int = MAX_NESTING, raw: bytes | None = None) -> bool:
    """Whether `value` holds objects and arrays nested more than `limit` levels deep; walked level
    by level, without recursion. `raw`, the JSON text `value` was parsed from, where at hand:
    with no more brackets than `limit` it cannot nest deeper, and the walk is skipped."""
    if raw is not None and raw.count(b"{") + raw.count(b"[") <= limit:
        return False
    level = [value] if type(value) is dict or type(value) is list else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        deeper = []
        for v in level:
            for c in v.values() if type(v) is dict else v:
                if type(c) is dict or type(c) is list:
                    deeper.append(c)
        level = deeper
    return False


def too_deep_detail(limit: int = MAX_NESTING) -> str:
    return "body nests objects and arrays more than %d levels deep, the limit" % limit
