"""app/runtime/batching.py: the cheapest split of waiting requests into passes of similar lengths,
checked against every split there is, and the pass the oldest request runs in."""

from __future__ import annotations

import itertools
import random

import pytest

from app.runtime.batching import _grid, head_pass, passes


def _cost(split, sizes, pass_tokens):
    return sum(pass_tokens + sum(sizes[i][0] for i in p) * max(_grid(sizes[i][1]) for i in p) for p in split)


def _cheapest(sizes, pass_tokens):
    """Every way to cut the requests, sorted by length, into runs: the least cost."""
    order = sorted(range(len(sizes)), key=lambda i: _grid(sizes[i][1]))
    best = None
    for cuts in itertools.product((False, True), repeat=len(order) - 1):
        split, run = [], [order[0]]
        for cut, i in zip(cuts, order[1:]):
            if cut:
                split.append(run)
                run = []
            run.append(i)
        split.append(run)
        cost = _cost(split, sizes, pass_tokens)
        best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_the_split_is_the_cheapest_there_is(seed):
    rng = random.Random(seed)
    sizes = [(rng.choice((1, 1, 1, 3)), rng.randint(30, 500)) for _ in range(rng.randint(2, 11))]
    pass_tokens = rng.choice((64, 512, 2000))
    split = passes(sizes, pass_tokens)
    assert sorted(i for p in split for i in p) == list(range(len(sizes)))  # each request once
    assert all(p == sorted(p) for p in split)  # oldest first in each
    assert _cost(split, sizes, pass_tokens) == _cheapest(sizes, pass_tokens)
    tops = [max(_grid(sizes[i][1]) for i in p) for p in split]
    assert tops == sorted(tops)  # shortest rows first


def test_far_apart_lengths_run_apart_and_the_oldest_runs_first():
    sizes = [(1, 470), (1, 40), (1, 460), (1, 45)]
    assert passes(sizes, 512) == [[1, 3], [0, 2]]
    assert head_pass(sizes, 512) == [0, 2]  # the oldest's pass, whatever its length
    assert head_pass(sizes[1:] + sizes[:1], 512) == [0, 2]


def test_one_pass_where_a_split_saves_less_than_a_pass_costs():
    assert head_pass([(1, 48)] * 64, 512) is None  # one length: nothing to save
    assert head_pass([(1, 40), (1, 300)], 512) is None  # 260 pads < one more pass
    assert head_pass([(1, 40), (1, 300)], 200) == [0]  # ... unless passes are cheap
    assert head_pass([(1, 40), (1, 470)] * 8, 0) is None  # 0: the model never splits
    assert head_pass([(1, 40)], 512) is None
    # Waste over the threshold, yet one pass still costs least: 8 short rows and one long one
    # pad 8 × 70 tokens, and a second pass costs 512.
    assert head_pass([(1, 100)] * 8 + [(1, 170)], 512) is None


class _Slot:
    """A model slot as the policy sees it: one adapter whose works all may share a pass."""

    class model:
        pass_tokens = 0

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
