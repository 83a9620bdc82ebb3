"""The last-token row adapter with the batching policy's micro-batches: within budgets, cut
longest first and run in the order of their oldest request, each padded to its own longest row;
bucketed shapes for CUDA-graph sessions; outputs back in request order, all at once or per
request as soon as its micro-batches have run."""

from __future__ import annotations

import numpy as np
import pytest

from app.runtime.batching import micro_batches
from models.base import MicroBatches
from models.qwen35.rows import MIN_WIDTH, LastTokenAdapter


def _pack(adapter, works, static=False, **limits):
    """The adapter's layout of the micro-batches the batching policy cuts within `limits`."""
    lengths, owners = adapter.row_lengths(works)
    parts = micro_batches(lengths, owners, adapter.bucket, MicroBatches(**limits))
    return adapter.pack(works, static=static, parts=parts)


def _works():
    return [[[1] * 5, [2] * 300], [[3] * 17], [[4] * 64, [5] * 1, [6] * 40]]


def _echo(packed):
    """A fake graph output per part: each row's length (position + 1), what unpack must route."""
    return [[(p["positions"] + 1).astype(np.float32)[:, None]] for p in packed.parts]


def test_rows_come_back_to_their_requests_in_order():
    adapter = LastTokenAdapter(pad_id=0, key="k")
    works = _works()
    packed = _pack(adapter, works, max_rows=2, max_tokens=10_000)
    out = adapter.unpack(_echo(packed), works, packed)
    assert [o[0][:, 0].tolist() for o in out] == [[5, 300], [17], [64, 1, 40]]
    assert packed.real_tokens == 5 + 300 + 17 + 64 + 1 + 40


def test_micro_batches_respect_budgets_and_pad_to_their_own_longest():
    adapter = LastTokenAdapter(pad_id=9, key="k")
    packed = _pack(adapter, _works(), max_rows=4, max_tokens=400)
    shapes = [p["input_ids"].shape for p in packed.parts]
    assert (1, 304) in shapes  # the 300-token row alone: 2 x 304 > 400
    assert all(r <= 4 and r * t <= 400 for r, t in shapes)
    assert all(t % 16 == 0 for _, t in shapes)
    assert packed.padded_tokens == sum(r * t for r, t in shapes)
    for part in packed.parts:  # right padding only, read at the last real token
        for row, pos in zip(part["input_ids"], part["positions"]):
            assert (row[pos + 1 :] == 9).all() and row[pos] != 9


def test_static_shapes_are_the_length_buckets():
    """CUDA-graph sessions get the same shapes: bucketed lengths, rows as they come."""
    adapter = LastTokenAdapter(pad_id=0, key="k")
    works = [[[7] * 70], [[8] * 3], [[9] * 10]]
    packed = _pack(adapter, works, static=True, max_rows=8, max_tokens=100_000)
    (part,) = packed.parts
    assert part["input_ids"].shape == (3, 80)  # 70 tokens -> the 80 bucket
    assert adapter.pack(works).parts[0]["input_ids"].shape == (3, 80)
    out = adapter.unpack(_echo(packed), works, packed)
    assert [o[0][:, 0].tolist() for o in out] == [[70], [3], [10]]


def test_rows_of_very_different_lengths_go_to_separate_micro_batches():
    """A mixed-length batch is banded by length: no row carries more than `max_row_padding`
    pads, rows of similar length still share a pass."""
    adapter = LastTokenAdapter(pad_id=0, key="k")
    lengths = [3399, 3300, 2000, 1900, 1000, 700, 650, 200, 120, 80]
    works = [[[1] * n] for n in lengths]
    packed = _pack(adapter, works, max_rows=64, max_tokens=1 << 20, max_row_padding=256)
    bands = [sorted(int(p + 1) for p in part["positions"]) for part in packed.parts]
    assert bands == [[3300, 3399], [1900, 2000], [1000], [650, 700], [80, 120, 200]]  # the oldest first
    for part in packed.parts:
        width = part["input_ids"].shape[1]
        assert all(width - (p + 1) <= 256 + 15 for p in part["positions"])  # + rounding to 16
    out = adapter.unpack(_echo(packed), works, packed)
    assert [o[0][0, 0] for o in out] == lengths
    assert packed.padded_tokens < 1.1 * packed.real_tokens


def test_long_rows_pad_to_sixteen_buckets_per_doubling():
    """Lengths past 16 x pad_to round up by 1/16 of their power-of-two range: little padding,
    few distinct shapes."""
    adapter = LastTokenAdapter(pad_id=0, key="k")
    widths = {}
    for n in range(1, 4097):
        (part,) = adapter.pack([[[1] * n]]).parts
        widths[n] = part["input_ids"].shape[1]
    assert all(w >= n and (w % 16 == 0) for n, w in widths.items())
    assert all(w - n < 16 for n, w in widths.items() if 32 <= n <= 256)
    assert all((w - n) / n < 1 / 16 for n, w in widths.items() if n > 256)
    assert len(set(widths.values())) == 79
    assert widths[1] == widths[16] == widths[32] == MIN_WIDTH == 32  # the chunked engines' least
    assert widths[3399] == 3456 and widths[300] == 304


def test_each_request_is_complete_after_its_own_micro_batches():
    """Micro-batches run in the order of the oldest request each holds (shortest first among
    equals); `ready` names the part after which a request's rows have all run, and unpacking just
    those requests from the parts run so far gives what the whole batch's unpack gives them."""
    adapter = LastTokenAdapter(pad_id=0, key="k")
    limits = {"max_rows": 64, "max_tokens": 1 << 20, "max_row_padding": 256}
    works = [[[1] * 3000], [[2] * 90], [[3] * 700, [4] * 80], [[5] * 100], [[6] * 1500]]
    packed = _pack(adapter, works, **limits)
    bands = [sorted(int(p + 1) for p in part["positions"]) for part in packed.parts]
    assert bands == [[3000], [80, 90, 100], [700], [1500]]
    assert packed.ready == [0, 1, 2, 1, 3]  # the 700-token row waits for part 2
    assert packed.meta["seq_len"] == 3072
    outputs = _echo(packed)
    whole = adapter.unpack(outputs, works, packed)
    for k in range(len(packed.parts)):
        done = [i for i, r in enumerate(packed.ready) if r == k]
        early = adapter.unpack(outputs[: k + 1], works, packed, only=done)
        for i, got in zip(done, early):
            np.testing.assert_array_equal(got[0], whole[i][0])
            assert got[0][:, 0].tolist() == [len(r) for r in works[i]]
    # Two parts that hold requests equally old: the shorter runs first.
    packed = _pack(adapter, [[[1] * 2000, [2] * 50]], **limits)
    assert [p["input_ids"].shape[1] for p in packed.parts] == [64, 2048] and packed.ready == [1]


def test_a_baked_head_is_cut_off_every_row_and_a_row_without_it_is_refused():
    import pytest

    from models.errors import InferenceFailed

    head = [7, 8, 9]
    adapter = LastTokenAdapter(pad_id=0, key="k", head=head)
    works = [[head + [1] * 5, head + [2] * 20], [head + [3]]]
    packed = _pack(adapter, works, max_rows=8)
    out = adapter.unpack(_echo(packed), works, packed)
    assert [o[0][:, 0].tolist() for o in out] == [[5, 20], [1]]  # lengths after the head
    assert packed.real_tokens == 26
    assert all(not np.isin(p["input_ids"], head).any() for p in packed.parts)
    for bad in ([[1, 8, 9, 4]], [head]):  # another head; the head alone
        with pytest.raises(InferenceFailed, match="prompt head"):
            adapter.pack([bad])


def test_the_shapes_listed_for_capture_at_load_are_the_one_row_buckets():
    """capture_batches lists one batch of one row per length bucket within the token bound,
    fewest tokens first: exactly the shapes a one-row request of any length up to the bound
    reaches, with the baked head cut off as for traffic; without a bound, the fine buckets."""
    head = [7, 8, 9]
    adapter = LastTokenAdapter(0, "k", head=head)

    def shape(works):
        return adapter.pack(works, static=True).feeds["input_ids"].shape

    listed = [shape(works) for works in adapter.capture_batches(16, 1024)]
    assert len(listed) == len(set(listed)) == 47
    assert all(rows == 1 for rows, _ in listed) and listed == sorted(listed)
    assert set(listed) == {shape([[head + [1] * n]]) for n in range(1, 1025)}
    assert [shape(w)[1] for w in adapter.capture_batches(16, 0)] == list(range(32, 257, 16))


def test_a_shared_head_pass_gives_every_part_the_head_and_counts_it_once_a_part():
    """SharedHeadAdapter: a request of several rows runs after the tokens they all share (at most
    its shortest row less one); every micro-batch gets that head, and the tokens a pass runs count
    it once a part, on top of each row's rest."""
    from models.qwen35.rows import SharedHeadAdapter

    fixed = [9, 8, 7]
    adapter = SharedHeadAdapter(pad_id=0, key="k", fixed=fixed)
    head = fixed + list(range(10, 60))
    work = [head + [1] * 5, head + [2] * 300, head + [3]]
    packed = _pack(adapter, [work], max_rows=2, max_tokens=10_000)
    assert len(packed.parts) == 2
    for feeds in packed.parts:
        assert feeds["head_ids"].tolist() == [head]
    out = adapter.unpack(_echo(packed), [work], packed)
    assert out[0][0][:, 0].tolist() == [5, 300, 1]  # each row's own length after the head
    assert packed.real_tokens == 5 + 300 + 1 + 2 * len(head)
    assert packed.meta["head_tokens"] == len(head)
    # Identical rows: the head stops one token short, so every row keeps a token to read out.
    same = adapter.pack([[head, head]])
    assert same.feeds["head_ids"].shape[1] == len(head) - 1 and same.feeds["positions"].tolist() == [0, 0]


def test_one_row_requests_share_passes_behind_the_fixed_head():
    from models.base import Prepared
    from models.errors import InferenceFailed
    from models.qwen35.rows import SharedHeadAdapter

    fixed = [9, 8, 7]
    adapter = SharedHeadAdapter(pad_id=0, key="k", fixed=fixed)

    def prepared(work):
        return Prepared(
            rows=len(work), tokens=sum(map(len, work)), longest=max(map(len, work)), work=work, context=None
        )

    one, other = prepared([fixed + [1, 2]]), prepared([fixed + [5] * 40])
    several = prepared([fixed + [1, 2], fixed + [1, 3]])
    odd = prepared([[4, 4, 4, 4]])  # a row without the fixed head: a pass of its own, after itself
    assert adapter.compatible(one) == adapter.compatible(other) == "k"
    assert len({adapter.compatible(p) for p in (several, odd, prepared(several.work))} | {"k"}) == 4
    packed = adapter.pack([one.work, other.work])
    assert packed.feeds["head_ids"].tolist() == [fixed]
    assert packed.feeds["positions"].tolist() == [1, 39]
    assert adapter.pack([odd.work]).feeds["head_ids"].tolist() == [[4, 4, 4]]
    with pytest.raises(InferenceFailed, match="fixed prompt head"):
        adapter.pack([one.work, odd.work])  # the batching policy never takes these together
