"""The committed workloads are what `benchmarks.make_workloads` writes, the 48-token Laya
workload is 48 tokens with the tokenizer the random english checkpoints carry, and laya_spread's
rows spread over 40-479 tokens."""

from __future__ import annotations

import json
import os

from benchmarks import make_workloads
from models.laya.prepare import LayaLimits, RowBuilder, prepare_rows
from models.tokenizer import TokenizerHandle


def _lines(name):
    with open(os.path.join(make_workloads.HERE, name), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_laya_48_rows_are_48_tokens_with_the_checkpoint_tokenizer(english):
    checkpoint, _ = english
    builder = RowBuilder(TokenizerHandle.load(os.path.join(checkpoint, "tokenizer")), 512, 192)
    bodies = _lines("laya_48.jsonl")
    assert len(bodies) == 64
    lengths = {len(prepare_rows(body, builder, LayaLimits())[1][0].ids) for body in bodies}
    assert lengths == {48}
    assert len({body["state"] for body in bodies}) > 4  # not one request repeated


def test_committed_laya_workloads_match_the_generator():
    tok = make_workloads.laya_tokenizer()
    assert make_workloads.laya_rows_of(48, 64, 3, tok) == _lines("laya_48.jsonl")
    assert make_workloads.laya_requests(64, 1, 1) == _lines("laya_1q.jsonl")
    assert make_workloads.laya_spread(256, 40, 480, 5, tok) == _lines("laya_spread.jsonl")


def test_laya_spread_rows_spread_over_many_lengths(english):
    checkpoint, _ = english
    builder = RowBuilder(TokenizerHandle.load(os.path.join(checkpoint, "tokenizer")), 512, 192)
    lengths = sorted(len(prepare_rows(body, builder, LayaLimits())[1][0].ids) for body in _lines("laya_spread.jsonl"))
    assert len(lengths) == 256 and lengths[0] == 40 and lengths[-1] <= 480
    assert lengths[64] < 100 and lengths[192] > 240 and len(set(lengths)) > 150  # log-uniform
