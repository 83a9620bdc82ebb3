"""Which of the waiting requests share a forward pass when their lengths differ.

Every row of a pass is padded to the pass's longest row. Traffic of many lengths (rows of 40 to
480 tokens) packed into one pass pays for ~2.5 times its real tokens; several passes of similar
lengths pay for fewer tokens but for each pass's fixed cost. A model states that cost in padded
tokens (`pass_tokens`: on the H200 one Laya pass is ~1.4 ms plus ~2.7 µs a padded token, so
~512; docs/benchmarks.md, 2026-12-01), and the split that costs least is found exactly over the
requests sorted by length.

Only the pass holding the oldest request runs now: the executor puts the others back at the
front of the queue, where the next pass takes them, oldest first, with whatever arrived
meanwhile. So the oldest request always runs next and none is starved.
"""
from __future__ import annotations

from typing import Sequence


def _grid(n: int) -> int:
    """n rounded up to 16 steps a doubling (multiples of 16 up to 256): lengths closer than a
    step are one item to the search, which keeps it to a few dozen items."""
    step = 16 if n <= 256 else 1 << (n.bit_length() - 5)
    return -(-n // step) * step


def passes(sizes: Sequence[tuple[int, int]], pass_tokens: int) -> list[list[int]]:
    """For requests of (rows, longest row) `sizes`: the cheapest split into passes, each the
    indices (in order) of its requests, the pass of the shortest rows first. The cost is
    Σ (pass_tokens + rows × longest row) over the passes, lengths taken on the search's grid."""
    grid = [_grid(length) for _, length in sizes]
    keys = sorted(set(grid))
    where = {k: i for i, k in enumerate(keys)}
    prefix = [0] * (len(keys) + 1)             # rows up to each length group
    for (rows, _), g in zip(sizes, grid):
        prefix[where[g] + 1] += rows
    for j in range(len(keys)):
        prefix[j + 1] += prefix[j]
    # best[j]: the cheapest split of the first j length groups; cut[j]: where its last pass starts.
    best, cut = [0], [0]
    for j in range(1, len(keys) + 1):
        top, rows_j = keys[j - 1], prefix[j]
        b, c = best[0] + rows_j * top, 0
        for i in range(1, j):
            cost = best[i] + (rows_j - prefix[i]) * top
            if cost < b:
                b, c = cost, i
        best.append(b + pass_tokens)
        cut.append(c)
    pass_of, j, n = {}, len(keys), 0
    while j:                            # the passes from the longest rows back
        for k in keys[cut[j]:j]:
            pass_of[k] = n
        n, j = n + 1, cut[j]
    out: list[list[int]] = [[] for _ in range(n)]
    for i, g in enumerate(grid):
        out[n - 1 - pass_of[g]].append(i)
    return out


def head_pass(sizes: Sequence[tuple[int, int]], pass_tokens: int) -> list[int] | None:
    """For requests of (rows, longest row) `sizes`, oldest first: the indices of those that share
    the oldest one's pass in the cheapest split; None when one pass for all costs least, or
    `pass_tokens` is 0."""
    if pass_tokens <= 0 or len(sizes) < 2:
        return None
    longest = max(length for _, length in sizes)
    if sum(rows * (longest - length) for rows, length in sizes) <= pass_tokens:
        return None                     # all the padding a split could save is not worth a pass
    split = passes(sizes, pass_tokens)
    if len(split) == 1:
        return None
    return next(p for p in split if p[0] == 0)
