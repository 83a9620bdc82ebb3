"""Batch adapter for models that read one hidden state per row (Cua-S1 questions, Open-Jev
candidates): rows from one or more requests become right-padded micro-batches.

Rows are sorted by length and cut into micro-batches within a row and padded-token budget,
each padded only to its own longest row, rounded up to a length bucket (multiples of `pad_to`
up to 16·`pad_to` tokens, then 16 buckets per doubling, so under 1/16 of a longer row is padding
and 1-4,096 tokens make 80 shapes rather than 256: the first pass of a new shape costs extra (on
the H200 the Open-Jev mix's first pass averaged 83 ms, the second 42, mostly cuDNN attention
plans, now off by default: OMNI_CUDA_SDPA_KERNEL; CUDA-graph sessions get the same shapes: rows are
not rounded, since a graph saves ~1 ms of a 4-row pass and a padded fourth row costs more), so a
3,000-token candidate never pads a batch of short ones.
A row also starts a new micro-batch when it would carry more than `max_row_padding` pads:
past about that many tokens a padded row costs the GPU more than one more forward pass's fixed
overhead (on the H200, a 9B pass costs ~6 ms plus ~32 µs a token), and one batch of a
80-3,399-token mix padded to its longest row ran slower than the same requests one by one
(benchmarks/padding_estimate.py). `positions` reads each row at its last real token; causality
keeps the trailing pads out of every real row, so answers do not depend on what a row was
batched with. Outputs come back in request order.
A graph with a baked prompt head (models/qwen35/prefix.py) takes each row without it: the
adapter cuts it off (`head`, prefix.cut), and lengths, buckets and budgets count what the graph runs.

The micro-batches are cut longest first but run in the order of the oldest request each holds
(FIFO, as the executor takes requests; shortest first among equals), and `Packed.ready` tells
the executor after which one each request is complete, so it is answered then instead of after
the whole take: the same GPU work, less waiting. Running the shortest first would wait less on
average still, but it moves the long requests' tail out (H200, Open-Jev 9B mix at c=16: mean 389
against 420 ms, p95 812 against 663-753; all at the end, as before: mean 484-514, p95 652-654).
"""
from __future__ import annotations

from typing import Callable, Hashable, Sequence

import numpy as np

from models.base import Packed, Prepared
from models.qwen35 import prefix

Rows = list  # one work item: a list of token-id lists, one per row


class LastTokenAdapter:
    def __init__(self, pad_id: int, key: str, max_rows: int = 64, max_tokens: int = 32768, pad_to: int = 16,
                 max_row_padding: int = 256, head: Sequence[int] = ()):
        self.pad_id, self.key = pad_id, key
        self.head = list(head)
        self.max_rows, self.max_tokens, self.pad_to = max_rows, max_tokens, pad_to
        self.max_row_padding = max_row_padding

    def compatible(self, prepared: Prepared) -> Hashable:
        return self.key

    def _width(self, n: int) -> int:
        """The padded length of a micro-batch whose longest row has n tokens."""
        if n <= 16 * self.pad_to:
            return _round(n, self.pad_to)
        return _round(n, 1 << (n.bit_length() - 5))         # 1/16 of the octave n falls in

    def pack(self, works: Sequence[Rows], static: bool = False) -> Packed:
        """`static` changes nothing here: the length buckets already bound the shapes, and the
        policy (QwenServed.cuda_graphs) captures only those that recur."""
        rows = [r for work in works for r in work]
        if self.head:
            rows = [prefix.cut(r, self.head) for r in rows]
        lengths = [len(r) for r in rows]
        order = sorted(range(len(rows)), key=lambda i: -lengths[i])
        owner = [w for w, work in enumerate(works) for _ in work]
        cut = list(chunks(lengths, order, self._width, self.max_rows, self.max_tokens, self.max_row_padding))
        parts, padded = [], 0
        where = [(0, 0)] * len(rows)          # where each row ran: (part, place in it)
        ready = [0] * len(works)              # the part after which each work is complete
        for p, chunk in enumerate(sorted(cut, key=lambda c: (min(owner[i] for i in c), lengths[c[0]]))):
            length = self._width(lengths[chunk[0]])
            total = len(chunk)
            ids = np.full((total, length), self.pad_id, dtype=np.int64)
            positions = np.zeros((total,), dtype=np.int64)
            for j, i in enumerate(chunk):
                ids[j, :lengths[i]] = rows[i]
                positions[j] = lengths[i] - 1
                where[i], ready[owner[i]] = (p, j), p          # parts come in order: p is the latest
            parts.append({"input_ids": ids, "positions": positions})
            padded += total * length
        return Packed(parts[0], rows=sum(p["input_ids"].shape[0] for p in parts), real_tokens=sum(lengths),
                      padded_tokens=padded, parts=parts, layout=where, ready=ready,
                      meta={"micro_batches": len(parts), "seq_len": max(int(p["input_ids"].shape[1]) for p in parts)})

    def unpack(self, outputs: Sequence[Sequence[np.ndarray]], works: Sequence[Rows], packed: Packed,
               only: Sequence[int] | None = None) -> list:
        """One tuple of arrays (one per graph output, rows in the work's order) per work; `only`:
        for those works alone, whose parts are among `outputs` (Packed.ready)."""
        where = packed.layout
        starts = np.cumsum([0] + [len(w) for w in works])
        out = []
        for w in range(len(works)) if only is None else only:
            places = where[starts[w]:starts[w + 1]]
            out.append(tuple(np.stack([outputs[p][k][j] for p, j in places])
                             for k in range(len(outputs[places[0][0]]))))
        return out


def chunks(lengths: Sequence[int], order: Sequence[int], width: Callable[[int], int], max_rows: int,
           max_tokens: int, max_row_padding: int):
    """Consecutive runs of `order` (longest first) within the budgets: at most `max_rows` rows and
    `max_tokens` padded tokens a run, padded to `width` of its first (longest) row, no row
    carrying more than `max_row_padding` pads."""
    chunk: list[int] = []
    for i in order:
        longest = width(lengths[chunk[0]] if chunk else lengths[i])
        if chunk and (len(chunk) + 1 > max_rows or (len(chunk) + 1) * longest > max_tokens
                      or longest - lengths[i] > max_row_padding):
            yield chunk
            chunk = []
        chunk.append(i)
    if chunk:
        yield chunk


def _round(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple

