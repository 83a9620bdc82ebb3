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
    assert sorted(i for p in split for i in p) == list(range(len(sizes)))   # each request once
    assert all(p == sorted(p) for p in split)                                # oldest first in each
    assert _cost(split, sizes, pass_tokens) == _cheapest(sizes, pass_tokens)
    tops = [max(_grid(sizes[i][1]) for i in p) for p in split]
    assert tops == sorted(tops)                                              # shortest rows first


def test_far_apart_lengths_run_apart_and_the_oldest_runs_first():
    sizes = [(1, 470), (1, 40), (1, 460), (1, 45)]
    assert passes(sizes, 512) == [[1, 3], [0, 2]]
    assert head_pass(sizes, 512) == [0, 2]                  # the oldest's pass, whatever its length
    assert head_pass(sizes[1:] + sizes[:1], 512) == [0, 2]


def test_one_pass_where_a_split_saves_less_than_a_pass_costs():
    assert head_pass([(1, 48)] * 64, 512) is None                    # one length: nothing to save
    assert head_pass([(1, 40), (1, 300)], 512) is None               # 260 pads < one more pass
    assert head_pass([(1, 40), (1, 300)], 200) == [0]                # ... unless passes are cheap
    assert head_pass([(1, 40), (1, 470)] * 8, 0) is None             # 0: the model never splits
    assert head_pass([(1, 40)], 512) is None
    # Waste over the threshold, yet one pass still costs least: 8 short rows and one long one
    # pad 8 × 70 tokens, and a second pass costs 512.
    assert head_pass([(1, 100)] * 8 + [(1, 170)], 512) is None
