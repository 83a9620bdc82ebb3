"""A fixed prompt head computed once at export and baked into the graph.

Every Cua-S1 prompt starts with the same system turn, and every Clef-Flash record with its
system turn and `STATE:` line. A causal model's state
after them is the same for every request, so the exporter runs them once, in float32, and stores
what the rest of the prompt reads from them: per GDN layer the last K-1 conv inputs and the
recurrent state, per attention layer the (rotated) keys and the values (and, for a graph that
returns every position's hidden state, the head's final-norm hidden states). The served graph
then takes only the tokens after the head, at positions that start at its length (graph.py); the
served adapters cut the head off each row (`cut`). The manifest records the head's ids; the
server refuses an export whose head its own tokenizer and prompt would not produce (`check_head`).
The exporter's side, which computes and bakes the head, is models/qwen35/bake.py.

A head can also be given per pass (graph.SharedHead): the rows of one request's candidates
share their chat turn and state, so the served adapter (rows.SharedHeadAdapter) hands the graph
their common prefix once (`common`) and each row's rest.

Public:
    cut(row, head) -> the row after the head                     # InferenceFailed without it
    check_head(manifest, head_ids, name) -> None                 # ValueError on a stale export
    common(rows) -> int                                          # leading tokens every row shares
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from models.errors import InferenceFailed


def cut(row, head: Sequence[int]):
    """`row` after the graph's baked `head`; InferenceFailed when it does not start with it or
    holds nothing after it (the server checks the head at load, so this means a bug)."""
    n = len(head)
    if len(row) <= n or list(row[:n]) != list(head):
        raise InferenceFailed("a row does not start with the graph's baked prompt head (%d tokens)" % n)
    return row[n:]


def check_head(manifest: Mapping, head_ids: Sequence[int], name: str = "this export") -> None:
    """Refuse an export whose baked head is not the one this server's prompt and tokenizer give."""
    baked = (manifest.get("prefix") or {}).get("ids")
    if baked is not None and list(baked) != list(head_ids):
        raise ValueError(
            "%s baked in a prompt head of %d tokens that differs from the %d tokens this server's "
            "prompt encodes to; run its export command again" % (name, len(baked), len(head_ids))
        )


def common(rows: Sequence[Sequence[int]]) -> int:
    """How many leading tokens every one of `rows` shares (a lone row: its whole length). One
    vectorised comparison: it runs on the executor thread for every pass of a shared head."""
    n = min((len(r) for r in rows), default=0)
    if n == 0:
        return 0
    block = np.stack([np.asarray(r[:n]) for r in rows])
    same = (block == block[0]).all(axis=0)
    return n if bool(same.all()) else int(np.argmin(same))


__all__ = ["cut", "check_head", "common"]
