"""Batch adapter for models that read one hidden state per row (Cua-S1 questions, Open-Jev
candidates): rows from one or more requests become right-padded micro-batches.

The batching policy (app/runtime/batching.py) decides the micro-batches from `row_lengths` and
`bucket`; `pack` lays each out, padded only to its own longest row rounded up to a length bucket
(multiples of `pad_to` up to 16·`pad_to` tokens, then 16 buckets per doubling, so under 1/16 of
a longer row is padding and 1-4,096 tokens make 79 shapes rather than 256; none is narrower
than MIN_WIDTH). Rows are not rounded to buckets: a padded row costs more than a CUDA graph
saves on a pass of a few rows. `positions` reads each row at its last real token; causality
keeps the trailing pads out of every real row, so answers do not depend on what a row was
batched with. Outputs come back in request order.
A graph with a baked prompt head (models/qwen35/prefix.py) takes each row without it: the
adapter cuts it off (`head`, prefix.cut), and lengths and buckets count what the graph runs.
`Packed.ready` tells the executor after which part each request is complete.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from models.base import Packed, Prepared
from models.errors import InferenceFailed
from models.qwen35 import prefix

Rows = list  # one work item: a list of token-id lists, one per row

# The narrowest pass: ONNX Runtime's chunked GatedDeltaNet engines serve 32 tokens a row and
# more, shorter passes get its recurrent engine, and a session built with a chunked engine
# forced (OMNI_CUDA_GDN_PLAN, chunked_split by default) refuses them. A pass this short is bound
# by its launches, not its tokens, so the pads cost little.
MIN_WIDTH = 32


class LastTokenAdapter:
    def __init__(self, pad_id: int, key: str, pad_to: int = 16, head: Sequence[int] = ()):
        self.pad_id, self.key, self.pad_to = pad_id, key, pad_to
        self.head = list(head)

    def compatible(self, prepared: Prepared) -> Hashable:
        return self.key

    def bucket(self, n: int) -> int:
        """The padded length of a micro-batch whose longest row has n tokens."""
        if n <= 16 * self.pad_to:
            return max(MIN_WIDTH, _round(n, self.pad_to))
        return _round(n, 1 << (n.bit_length() - 5))  # 1/16 of the octave n falls in

    def _rows(self, works: Sequence[Rows]) -> list[list[int]]:
        rows = [r for work in works for r in work]
        return [prefix.cut(r, self.head) for r in rows] if self.head else rows

    def row_lengths(self, works: Sequence[Rows]) -> tuple[list[int], list[int]]:
        """Each row's length as the graph runs it, and the index of the work it belongs to."""
        return [len(r) for r in self._rows(works)], [w for w, work in enumerate(works) for _ in work]

    def pack(self, works: Sequence[Rows], static: bool = False, parts: Sequence[Sequence[int]] | None = None) -> Packed:
        """`parts`: the micro-batches as row indices, in run order (None: one of every row).
        `static` changes nothing: the length buckets already bound the shapes."""
        rows = self._rows(works)
        lengths = [len(r) for r in rows]
        owner = [w for w, work in enumerate(works) for _ in work]
        cut = [list(range(len(rows)))] if parts is None else parts
        feeds, padded = [], 0
        where = [(0, 0)] * len(rows)  # where each row ran: (part, place in it)
        ready = [0] * len(works)  # the part after which each work is complete
        for p, chunk in enumerate(cut):
            length = self.bucket(max(lengths[i] for i in chunk))
            ids = np.full((len(chunk), length), self.pad_id, dtype=np.int64)
            positions = np.zeros((len(chunk),), dtype=np.int64)
            for j, i in enumerate(chunk):
                ids[j, : lengths[i]] = rows[i]
                positions[j] = lengths[i] - 1
                where[i], ready[owner[i]] = (p, j), max(ready[owner[i]], p)
            feeds.append({"input_ids": ids, "positions": positions})
            padded += len(chunk) * length
        return Packed(
            feeds[0],
            rows=len(rows),
            real_tokens=sum(lengths),
            padded_tokens=padded,
            parts=feeds,
            layout=where,
            ready=ready,
            meta={"micro_batches": len(feeds), "seq_len": max(int(f["input_ids"].shape[1]) for f in feeds)},
        )

    def capture_batches(self, graph_rows: int, max_tokens: int) -> list[list[Rows]]:
        """For a model that captures as it loads (GraphPolicy.precapture): one batch of one row
        per length bucket within `max_tokens` (none: the buckets of 16·`pad_to` tokens and less),
        fewest tokens first: the shapes a request of one row brings, so they replay from the first
        such request. Passes of several rows are left to traffic (GraphPolicy.capture_after).
        Rows are the baked head and pad ids: a capture depends on shapes only."""
        bound = max_tokens or 16 * self.pad_to
        batches, width = [], self.bucket(1)
        while width <= bound:
            batches.append([[self.head + [self.pad_id] * width]])
            width = self.bucket(width + 1)
        return batches

    def unpack(
        self,
        outputs: Sequence[Sequence[np.ndarray]],
        works: Sequence[Rows],
        packed: Packed,
        only: Sequence[int] | None = None,
    ) -> list:
        """One tuple of arrays (one per graph output, rows in the work's order) per work; `only`:
        for those works alone, whose parts are among `outputs` (Packed.ready)."""
        where = packed.layout
        starts = np.cumsum([0] + [len(w) for w in works])
        out = []
        for w in range(len(works)) if only is None else only:
            places = where[starts[w] : starts[w + 1]]
            out.append(
                tuple(np.stack([outputs[p][k][j] for p, j in places]) for k in range(len(outputs[places[0][0]])))
            )
        return out


def _round(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


class SharedHeadAdapter(LastTokenAdapter):
    """Rows for a graph that takes a prompt head per pass (graph.SharedHead): a pass's rows all
    continue one head, which the graph runs once, and each row holds only what follows it.

    A request of several rows (Open-Jev's candidates, which repeat the chat turn and the state)
    runs in a pass of its own, its head the tokens all its rows share (at most its shortest row
    less one token); requests of one row share passes, their head `fixed`, the tokens every row
    of the model starts with. So a request's head depends on the request alone, never on what
    it is batched with, and its answers are the same either way."""

    def __init__(self, pad_id: int, key: str, fixed: Sequence[int], pad_to: int = 16):
        super().__init__(pad_id, key, pad_to)
        if not fixed:
            raise ValueError("a shared-head adapter needs the tokens every row starts with")
        self.fixed = list(fixed)
        self._fixed = np.asarray(self.fixed, dtype=np.int64)

    def _starts_fixed(self, row) -> bool:
        n = len(self.fixed)
        return len(row) > n and bool(np.array_equal(row[:n], self._fixed))

    def compatible(self, prepared: Prepared) -> Hashable:
        work = prepared.work
        if len(work) == 1 and self._starts_fixed(work[0]):
            return self.key
        return (self.key, id(prepared))  # a pass of its own

    def pass_head(self, works: Sequence[Rows]) -> np.ndarray:
        """The pass's prompt head (int64): the one work's shared tokens, or `fixed` for works of
        one row."""
        rows = [r for work in works for r in work]
        if len(works) == 1 and (len(rows) > 1 or not self._starts_fixed(rows[0])):
            n = min(prefix.common(rows), min(len(r) for r in rows) - 1)
            if n < 1:
                raise InferenceFailed("a row of one token has no prompt head to share")
            return np.asarray(rows[0][:n], dtype=np.int64)
        if not all(self._starts_fixed(r) for r in rows):
            raise InferenceFailed("rows that do not start with the model's fixed prompt head share a pass")
        return self._fixed

    def _rows(self, works: Sequence[Rows]) -> list[list[int]]:
        n = len(self.pass_head(works))
        return [r[n:] for work in works for r in work]

    def pack(self, works: Sequence[Rows], static: bool = False, parts: Sequence[Sequence[int]] | None = None) -> Packed:
        packed = super().pack(works, static, parts)
        head = self.pass_head(works)[None]
        runs_of = packed.parts or [packed.feeds]
        for feeds in runs_of:
            feeds["head_ids"] = head
        # The head runs once a part: tokens the pass runs, real ones (the requests' usage counts
        # it once a candidate, as every candidate reads it).
        runs = head.shape[1] * len(runs_of)
        packed.real_tokens += runs
        packed.padded_tokens += runs
        packed.meta["head_tokens"] = head.shape[1]
        return packed

    def capture_batches(self, graph_rows: int, max_tokens: int) -> list[list[Rows]]:
        return []  # a pass's shape holds its head's length: none recurs enough to capture
