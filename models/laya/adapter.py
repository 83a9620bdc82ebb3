"""Pack Laya rows from one or more requests into one batch; split the outputs back.

A pass at its own shape packs its rows side by side into batch rows of one length (`bins`:
first fit, longest first, at the length that leaves the fewest padded tokens), so a short
question row costs its own tokens, not the longest row's. The graph keeps every query to its
own row's keys and counts each row's positions from 0 (models/laya/graph.py), so a row's
answers do not depend on what it shares a batch row with. A bucketed pass (`static`, the shapes
CUDA graphs replay) holds one row a batch row: rows to `static_rows`, lengths to a multiple of
`static_multiple` and at least 2 marker columns (the graph's TopK(2) needs them; masked columns
change nothing), so that few shapes recur.

`unpack` also calibrates (finish.calibrate) with the model's calibration: once per batch on the
executor thread, vectorised by option count, instead of once per question on the event loop,
whose CPU every other request needs at high load.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from itertools import chain

import numpy as np

from models.base import Packed, Prepared
from models.laya import finish as finishing
from models.laya.prepare import Row


# Marker columns of a bucketed batch, at least: questions of 2 to 8 options share one shape. A
# masked column adds one gathered vector to the scorer and changes no answer.
STATIC_MARKER_COLUMNS = 8
MASKED_LOGIT = -1.0e4  # the logit the graph gives a marker column that is not an option (graph.py)
INPUTS = ("input_ids", "segments", "positions", "qtype", "starts", "marker_pos", "marker_mask")


class LayaAdapter:
    def __init__(self, pad_id: int, calibration: dict, pad_to: int = 16, max_len: int = 512):
        self.pad_id = pad_id
        self.pad_to = pad_to
        self.max_len = max_len
        self.calibration = calibration

    def compatible(self, prepared: Prepared) -> Hashable:
        return "laya"  # any rows of one model can share a batch

    def padded_length(self, longest: int, multiple: int) -> int:
        return min(-(-longest // multiple) * multiple, max(self.max_len, longest))

    def padded_tokens(self, works: Sequence[list[Row]], static: bool = False) -> int:
        """Batch tokens (real and padding) of the pass `pack(works, static)` makes."""
        lengths = [len(r.ids) for work in works for r in work]
        if not static:
            width, placed = self.bins(lengths)
            return width * len(placed)
        rows, length = self.static_shape(lengths)
        return rows * length

    def static_shape(self, lengths: Sequence[int]) -> tuple[int, int]:
        """(batch rows, length) of a bucketed pass of rows of `lengths`, one row a batch row."""
        total = static_rows(len(lengths))
        return total, self.padded_length(max(lengths), static_multiple(total, max(lengths), self.pad_to))

    def bins(self, lengths: Sequence[int]) -> tuple[int, list[list[int]]]:
        """(batch row length, the rows each batch row holds) for rows of `lengths`, packed first
        fit, longest first, at the length that leaves the fewest batch tokens: the longest row
        rounded up to `pad_to`, or a power of two up to the model's limit (a longer batch row
        takes more short rows; its attention spans more keys, which costs little beside the
        projections at these lengths)."""
        shortest = self.padded_length(max(lengths), self.pad_to)
        widths = [shortest] + [w for w in (64, 128, 256, 512, 1024, 2048, 4096) if shortest < w <= self.max_len]
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        total = sum(lengths)
        best: tuple[int, list[list[int]]] | None = None
        for width in widths:
            if best is not None and width * -(-total // width) >= best[0] * len(best[1]):
                continue  # not even a perfect packing at this width would leave fewer tokens
            free: list[int] = []
            placed: list[list[int]] = []
            for i in order:
                n = lengths[i]
                for b, room in enumerate(free):
                    if room >= n:
                        free[b] -= n
                        placed[b].append(i)
                        break
                else:
                    free.append(width - n)
                    placed.append([i])
            if best is None or width * len(placed) < best[0] * len(best[1]):
                best = (width, placed)
            if best[0] * len(best[1]) == total:
                break
        assert best is not None
        return best

    def pack(self, works: Sequence[list[Row]], static: bool = False) -> Packed:
        rows = [row for work in works for row in work]
        n = len(rows)
        lengths = [len(r.ids) for r in rows]
        k_cols = max(2, max(len(r.markers) for r in rows))
        if static:
            # Few distinct shapes, so captured CUDA graphs get reused: rows to static_rows, marker
            # columns to a power of two of at least STATIC_MARKER_COLUMNS, length to a multiple
            # that shrinks as rows grow (static_multiple), one row a batch row. Filler rows hold
            # no tokens and attend to nothing; their outputs are cut off by unpack.
            (total, length), k_cols = self.static_shape(lengths), _pow2(max(STATIC_MARKER_COLUMNS, k_cols))
            placed = [[i] for i in range(n)]
        else:
            total = n
            length, placed = self.bins(lengths)
        batch = len(placed) if not static else total
        # Each row's first flat token (batch row × length + its offset there) and its segment
        # number within its batch row; the tokens and markers are then written in a few
        # vectorised assignments over the whole pass rather than row by row.
        starts = np.zeros((total,), dtype=np.int64)
        seg = np.empty((n,), dtype=np.int64)
        for b, members in enumerate(placed):
            at = b * length
            for s, i in enumerate(members, 1):
                starts[i], seg[i] = at, s
                at += lengths[i]
        lens = np.asarray(lengths, dtype=np.int64)
        real = int(lens.sum())
        within = _ranks(lens)  # each token's position in its row
        flat = np.repeat(starts[:n], lens) + within
        ids = np.full((batch * length,), self.pad_id, dtype=np.int64)
        segments = np.zeros((batch * length,), dtype=np.int64)
        positions = np.zeros((batch * length,), dtype=np.int64)
        qtypes = np.zeros((batch * length,), dtype=np.int64)
        ids[flat] = np.fromiter(chain.from_iterable(r.ids for r in rows), dtype=np.int64, count=real)
        segments[flat] = np.repeat(seg, lens)
        positions[flat] = within
        qtypes[flat] = np.repeat(np.fromiter((r.qtype for r in rows), dtype=np.int64, count=n), lens)
        ids, segments, positions, qtypes = (a.reshape(batch, length) for a in (ids, segments, positions, qtypes))
        counts = np.fromiter((len(r.markers) for r in rows), dtype=np.int64, count=n)
        owner = np.repeat(np.arange(n, dtype=np.int64), counts)
        column = _ranks(counts)
        markers = np.fromiter(chain.from_iterable(r.markers for r in rows), dtype=np.int64, count=owner.size)
        mpos = np.zeros((total, k_cols), dtype=np.int64)
        mmask = np.zeros((total, k_cols), dtype=bool)
        mpos[owner, column] = markers + starts[owner]
        mmask[owner, column] = True
        starts[n:] = np.arange(n, total, dtype=np.int64) * length  # filler rows: their own batch rows
        feeds = dict(zip(INPUTS, (ids, segments, positions, qtypes, starts, mpos, mmask), strict=True))
        return Packed(
            feeds,
            rows=total,
            real_tokens=real,
            padded_tokens=batch * length,
            meta={"seq_len": length, "marker_columns": k_cols, "batch_rows": batch},
        )

    def capture_batches(self, graph_rows: int, max_tokens: int) -> list[list[list[Row]]]:
        """One batch (works of one row each) per distinct bucketed shape a captured pass can
        have: every row bucket up to `graph_rows` rows, at every row length up to the model's
        limit, within `max_tokens` = rows × longest row (the model's GraphPolicy); fewest tokens
        first. Rows are pad ids: a capture depends on shapes only."""
        shapes: dict[tuple[int, int], tuple[int, int]] = {}
        prev = 0
        for n in range(1, graph_rows + 1):
            bucket = static_rows(n)
            if bucket == prev:
                continue  # the fewest rows of a bucket have the loosest token bound
            prev = bucket
            for length in range(1, self.max_len + 1):
                if max_tokens and n * length > max_tokens:
                    break
                padded = self.padded_length(length, static_multiple(bucket, length, self.pad_to))
                shapes.setdefault((bucket, padded), (n, length))
        order = sorted(shapes, key=lambda shape: (shape[0] * shape[1], shape[0]))
        return [[[Row([self.pad_id] * shapes[s][1], [0], 0)] for _ in range(shapes[s][0])] for s in order]

    def unpack(
        self,
        outputs: Sequence[np.ndarray],
        works: Sequence[list[Row]],
        packed: Packed,
        only: Sequence[int] | None = None,
    ) -> list:
        """Each work's (logits, act probabilities, calibrated questions); `only`: those works'.
        A bucketed pass's outputs hold its filler rows after the real ones: they are cut off
        first, so nothing below sees a row that no work owns."""
        real = sum(len(work) for work in works)
        logits, act_logits = outputs[0][:real], outputs[1][:real]
        if act_logits.dtype != np.float32:
            act_logits = act_logits.astype(np.float32)
        act = np.exp(act_logits - np.maximum.reduce(act_logits, axis=-1, keepdims=True))
        act /= np.add.reduce(act, axis=-1, keepdims=True)
        flat = [r for work in works for r in work]
        counts = [len(work) for work in works]
        if any(r.span != 1 for r in flat):
            logits, act, flat = merge_spread(logits, act, flat)
            counts = [sum(1 for r in work if r.span) for work in works]
        rows = [(len(r.markers), r.qtype, r.order) for r in flat]
        calibrated = finishing.calibrate(logits, act, rows, self.calibration)
        out, start = [], 0
        for n in counts:
            end = start + n
            out.append((logits[start:end], act[start:end], calibrated[start:end]))
            start = end
        return out if only is None else [out[i] for i in only]


class _Merged:
    """A spread question's rows as one: a marker per option, its type and option order."""

    __slots__ = ("markers", "qtype", "order", "span")

    def __init__(self, options: int, qtype: int, order):
        self.markers, self.qtype, self.order, self.span = range(options), qtype, order, 1


def merge_spread(logits: np.ndarray, act: np.ndarray, rows: Sequence[Row]):
    """One row of logits per question: a question spread over several rows (`Row.span`) gets its
    rows' option logits side by side, in option order, so calibration puts them through one
    softmax; its act probabilities are its rows' mean. (logits, act, one entry per question)."""
    groups, i = [], 0
    while i < len(rows):
        span = max(1, rows[i].span)
        groups.append((i, span))
        i += span
    width = max(logits.shape[1], max(sum(len(rows[j].markers) for j in range(i, i + s)) for i, s in groups))
    # Columns past a question's options hold the graph's masked logit, as they do in a pass
    # without spread questions: a row's outputs do not depend on what shares its pass.
    merged = np.full((len(groups), width), MASKED_LOGIT, dtype=logits.dtype)
    merged_act = np.empty((len(groups), act.shape[1]), dtype=act.dtype)
    out = []
    for g, (i, span) in enumerate(groups):
        col = 0
        for j in range(i, i + span):
            k = len(rows[j].markers)
            merged[g, col : col + k] = logits[j, :k]
            col += k
        merged_act[g] = act[i : i + span].mean(axis=0)
        out.append(rows[i] if span == 1 else _Merged(col, rows[i].qtype, rows[i].order))
    return merged, merged_act, out


def static_multiple(rows: int, longest: int, pad_to: int, padding_budget: int = 256) -> int:
    """The length multiple of a bucketed batch of `rows` rows whose longest row has `longest`
    tokens: rounding may add ~`padding_budget` tokens to a pass or 1/8 of its longest row,
    whichever is more, within [`pad_to`, 64]. A pass of a few rows is launch-bound, so padding
    it costs little and coarse buckets mean fewer graphs to capture; at 16 rows the forward is
    mostly arithmetic and every padded column is paid for 16 times. Long rows keep
    coarser steps, so traffic of every length up to 512 still makes few enough shapes for the
    graph budget (OMNI_CUDA_GRAPHS)."""
    by_budget = _pow2_below(padding_budget // rows)  # a power of two (12 rows: 16, not 21)
    by_length = _pow2_below(longest // 8)
    return max(pad_to, min(64, max(by_budget, by_length)))


def static_rows(n: int) -> int:
    """The row bucket of a captured batch of `n` rows: a power of two up to 8, then the next
    multiple of 4 up to 32 and of 8 beyond (14 buckets up to 64). A filler row costs about what
    a real one does, so coarse buckets are paid for in every pass (powers of two would make a
    10-row pass a 16-row one and a 22-row pass a 32-row one), while replay saves only the
    launch overhead."""
    if n <= 8:
        return _pow2(n)
    step = 4 if n <= 32 else 8
    return -(-n // step) * step


def _ranks(counts: np.ndarray) -> np.ndarray:
    """For groups of `counts` items laid end to end, each item's index within its own group."""
    return np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def _pow2(n: int) -> int:
    """The smallest power of two ≥ n."""
    return 1 << max(0, (n - 1).bit_length())


def _pow2_below(n: int) -> int:
    """The largest power of two ≤ n (1 for n < 2)."""
    return 1 << (max(1, n).bit_length() - 1)
