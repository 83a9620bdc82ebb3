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
