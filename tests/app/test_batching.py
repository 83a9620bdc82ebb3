"""app/runtime/batching.py: which waiting jobs share a pass (cheap ones first, none starved, the
queue bound), and when a pass that could replay a bucketed shape runs packed at its own shape."""

from __future__ import annotations

from app.runtime.batching import BatchPolicy
from models.laya.adapter import LayaAdapter
from models.laya.prepare import Row


class _Slot:
    """A model slot as the policy sees it: one adapter whose works all may share a pass."""

    class model:
        class adapter:
            @staticmethod
            def compatible(prepared):
                return 0


class _Job:
    def __init__(self, rows, longest, t):
        from models.base import Prepared

        self.slot, self.prepared = _Slot, Prepared(rows, rows * longest, longest, None, None)
        self.cancelled, self.enqueued, self.passed_over = False, t, 0


def _queue(*sizes):
    import collections

    return collections.deque(_Job(r, n, t) for t, (r, n) in enumerate(sizes))


def test_a_cheap_job_goes_before_costly_ones_and_takes_only_cheap_company():
    from app.runtime.batching import BatchPolicy

    policy = BatchPolicy(256, 131072, 64)
    q = _queue((64, 512), (64, 512), (1, 60), (2, 300), (1, 80))
    big1, big2, small1, medium, small2 = list(q)
    assert policy.next_pass(q, drop=None) == [small1, medium, small2]  # all within 1/8 of the oldest's cost
    assert big1.passed_over == big2.passed_over == 60 + 600 + 80  # the tokens that went first
    assert list(q) == [big1, big2]
    assert policy.next_pass(q, drop=None) == [big1]  # two jobs that each fill 1/8 of the budget: apart
    assert policy.next_pass(q, drop=None) == [big2]


def test_a_costly_job_is_passed_over_only_until_the_cheap_work_costs_as_much():
    from app.runtime.batching import BatchPolicy

    policy = BatchPolicy(256, 131072, 64)
    q = _queue((64, 512))
    big = q[0]
    for i in range(8):  # 8 passes of 8 x 512 tokens: 32,768, its own cost
        small = _Job(8, 512, 1 + i)
        q.append(small)
        assert policy.next_pass(q, drop=None) == [small] and big.passed_over == 4096 * (i + 1)
    late = _Job(1, 60, 99)
    q.append(late)
    assert policy.next_pass(q, drop=None) == [big, late]  # its turn: the cheap one rides along


def test_the_policy_holds_the_queue_bound():
    from app.config import Settings
    from app.runtime.batching import QUEUED_PASSES, BatchPolicy

    policy = BatchPolicy.from_settings(Settings(max_batch_tokens=1000, max_batch_rows=4))
    assert policy.queue_tokens == QUEUED_PASSES * 1000 and policy.max_rows == 4


def test_a_pass_runs_packed_where_its_bucketed_shape_costs_more_than_launches():
    adapter = LayaAdapter(0, {})
    like = [[Row([5] * n, [1], 0)] for n in (100, 97, 90)]
    unlike = [[Row([5] * n, [1], 0)] for n in (480, 30, 20, 300)]
    assert not BatchPolicy.packs_tighter(adapter, like, 768)  # 4 × 128 bucketed: launch-bound, replay
    # Bucketed: 4 rows of 512; packed: 480 | 300 + 30 + 20 in two batch rows of 480.
    assert adapter.padded_tokens(unlike, static=True) == 2048 and adapter.padded_tokens(unlike) == 960
    assert BatchPolicy.packs_tighter(adapter, unlike, 768)
    assert not BatchPolicy.packs_tighter(adapter, unlike, 2048)  # launch-bound either way: replay
    assert not BatchPolicy.packs_tighter(adapter, unlike, 0)  # 0: the model always replays
    assert not BatchPolicy.packs_tighter(object(), unlike, 768)  # adapters that do not pack
    small = [[Row([5] * n, [1], 0)] for n in (200, 20, 10)]  # 4 × 256 bucketed, 1 × 256 packed
    assert adapter.padded_tokens(small, static=True) == 1024 and adapter.padded_tokens(small) == 256
    assert BatchPolicy.packs_tighter(adapter, small, 768) and not BatchPolicy.packs_tighter(adapter, small, 1024)
