"""The conformance suite every family's batch adapter passes: a request's answers are the same
alone or in a concurrent batch of mixed requests, through the real executor (batching policy,
bucketed shapes, micro-batches, ONNX Runtime sessions), and nothing valid fails.

Requests are generated over a family's whole request space, from its own `limits()`: question
types mixed within a request and across the batch, option and level counts from 2 to the
model's limits, states from one word to past what the model reads (Unicode included), both
response profiles. A family's `test_conformance.py` gives its export and how long a state may
get; `make test-gpu` runs the same checks against full-size exports on a GPU
(tests/gpu/test_gpu_tier.py), with the half-precision bound.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from benchmarks import traffic as traffic_words
from models.errors import RequestError

# Float32 on the CPU: a request's numbers alone and batched differ only by the summation order
# that another shape brings.
ATOL = 1e-5
CONFORMANCE = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))

# Words states are drawn from (Unicode, escapes, symbols): the traffic generator's own.
WORDS = traffic_words.WORDS


def state(max_words: int) -> st.SearchStrategy[Any]:
    """A state: words (a few to `max_words`), free Unicode text, or a small JSON object."""
    words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=max_words).map(" ".join)
    long = st.integers(max(1, max_words // 2), max_words).map(
        lambda n: " ".join(WORDS[i % len(WORDS)] for i in range(n))
    )
    text = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=60)
    obj = st.fixed_dictionaries({"ticket": words, "tags": st.lists(st.sampled_from(WORDS), max_size=4)})
    return st.one_of(words, long, text, obj)


def _count(limit: int, cap: int) -> st.SearchStrategy[int]:
    """2 to min(limit, cap), the limit itself now and then."""
    top = max(2, min(limit, cap))
    return st.one_of(st.integers(2, top), st.just(top), st.just(2))


def question(kind: str, limits: dict, cap: int) -> st.SearchStrategy[dict]:
    instructions = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
    if kind == "choice":
        n = _count(limits.get("max_choice_options", 26), cap)
        return st.builds(
            lambda n, text: {
                "type": "choice",
                "instructions": text,
                "criteria": {"o%d" % i: "option %d: %s" % (i, WORDS[i % len(WORDS)]) for i in range(n)},
            },
            n,
            instructions,
        )
    if kind == "score":
        n = _count(limits.get("max_score_levels", 10), min(cap, 10))
        return st.builds(
            lambda n, text: {"type": "score", "instructions": text, "criteria": ["level %d" % i for i in range(n)]},
            n,
            instructions,
        )
    return st.builds(lambda text: {"type": "noul", "instructions": text}, instructions)


def request(model: str, limits: dict, max_words: int, max_questions: int = 4, cap: int = 40):
    """(body, profile) for one request to `model` within its `limits`."""
    kinds = st.sampled_from(limits["question_types"])
    questions = st.lists(
        kinds.flatmap(lambda k: question(k, limits, cap)),
        min_size=1,
        max_size=min(max_questions, limits.get("max_questions", max_questions)),
    )
    body = st.builds(
        lambda s, qs: {"model": model, "state": s, "questions": {"q%d" % i: q for i, q in enumerate(qs)}},
        state(max_words),
        questions,
    )
    return st.tuples(body, st.sampled_from(["reference", "jev"]))


def batches(model: str, limits: dict, max_words: int, **kw) -> st.SearchStrategy[list]:
    return st.lists(request(model, limits, max_words, **kw), min_size=2, max_size=6)


def same(a: Any, b: Any, atol: float, where: str = "output") -> None:
    """`a` and `b` equal, floats and arrays within `atol` (relative to their size too)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        assert a.ndim == b.ndim and a.shape[:1] == b.shape[:1], (where, a.shape, b.shape)
        if a.shape != b.shape:
            # Columns past a work's own (marker columns another request or a bucket widened the
            # pass to) are the pass's padding: a work's numbers are the leading ones.
            common = tuple(slice(0, min(x, y)) for x, y in zip(a.shape, b.shape))
            a, b = a[common], b[common]
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), atol=atol, rtol=atol, err_msg=where)
        else:
            np.testing.assert_array_equal(a, b, err_msg=where)
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            same(getattr(a, f.name), getattr(b, f.name), atol, "%s.%s" % (where, f.name))
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), (where, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, atol, "%s[%d]" % (where, i))
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            same(a[k], b[k], atol, "%s[%r]" % (where, k))
    elif isinstance(a, float) or isinstance(b, float):
        assert abs(float(a) - float(b)) <= atol * (1 + abs(float(a))), (where, a, b)
    else:
        assert a == b, (where, a, b)


def same_answers(alone: dict, batched: dict, atol: float) -> None:
    """Finished responses: the same usage, keys and choices; probabilities within `atol` plus the
    4-place rounding; a choice may differ only where its top two were within `atol` alone."""
    assert alone.get("usage") == batched.get("usage")  # padding never counts
    assert alone["answers"].keys() == batched["answers"].keys()
    for qid, a in alone["answers"].items():
        b = batched["answers"][qid]
        pa, pb = a.get("probabilities") or {}, b.get("probabilities") or {}
        assert pa.keys() == pb.keys()
        for k in pa:
            assert abs(pa[k] - pb[k]) <= atol + 1e-4, (qid, k, pa[k], pb[k])
        if a["type"] == "choice" and a["choice"] != b["choice"]:
            top = sorted(pa.values())[-2:]
            assert top[1] - top[0] <= atol + 1e-4, (qid, a["choice"], b["choice"])


async def _alone_and_batched(harness, slot, items: Sequence[tuple[dict, str]]):
    model = slot.model
    prepared: list[Any] = []
    for body, profile in items:
        try:
            prepared.append(model.prepare(body, profile))
        except RequestError as exc:  # over a limit: a 4xx, the same alone or batched
            assert 400 <= exc.status < 500
            prepared.append(None)
    valid = [i for i, p in enumerate(prepared) if p is not None]
    alone = {}
    for i in valid:
        alone[i] = await harness.executor.submit(slot, prepared[i]).future
    with harness.executor._cv:  # queued together, before the thread takes any
        jobs = {i: harness.executor.submit(slot, prepared[i]) for i in valid}
    batched = {i: await job.future for i, job in jobs.items()}
    return prepared, valid, alone, batched


def check_batch_invariance(
    harness, slot, items: Sequence[tuple[dict, str]], atol: float = ATOL, outputs: bool = True
) -> int:
    """Every valid request of `items` answered alone and in one concurrent batch, the same within
    `atol` (`outputs`: the raw outputs too, not only the finished answers; float32 only, where
    logits compare as closely as probabilities); returns how many were valid."""
    prepared, valid, alone, batched = asyncio.run(_alone_and_batched(harness, slot, items))
    for i in valid:
        body, profile = items[i]
        if outputs:
            same(alone[i], batched[i], atol, "request %d" % i)
        a = slot.model.finish(prepared[i], alone[i], profile, slot.name, requested=body["model"])
        b = slot.model.finish(prepared[i], batched[i], profile, slot.name, requested=body["model"])
        same_answers(a, b, atol)
    return len(valid)


def traffic(model: str, limits: dict, n: int, seed: int, max_words: int = 150, cap: int = 12) -> list[dict]:
    """`n` requests like users send (benchmarks/traffic.py), states of 1 to `max_words` words."""
    return traffic_words.traffic(model, limits, n, seed, max_words=max_words, cap=cap)


def check_contract(model) -> None:
    """The family's adapter implements models/base.py's contract as written: the base methods
    with their parameters, and the optional ones its model's policies call for."""
    import inspect

    from models.base import BatchAdapter, CapturingAdapter, MicroBatchAdapter

    adapter = model.adapter
    assert isinstance(adapter, BatchAdapter)
    for name in ("pack", "unpack"):
        want = [p for p in inspect.signature(getattr(BatchAdapter, name)).parameters if p != "self"]
        have = list(inspect.signature(getattr(adapter, name)).parameters)
        assert have[: len(want)] == want, (name, have, want)
    if model.cuda_graphs is not None and model.cuda_graphs.precapture:
        assert isinstance(adapter, CapturingAdapter)
    if model.micro_batches is not None:
        assert isinstance(adapter, MicroBatchAdapter)
        assert "parts" in inspect.signature(adapter.pack).parameters


class FamilyConformance:
    """The suite as a test class: a family's `TestConformance(FamilyConformance)` names its model,
    the limits the requests are drawn within (checked against the model's own), how long a state
    gets, other `request` options (KW), and its export (an `export` fixture)."""

    MODEL: str = ""
    LIMITS: dict = {}
    MAX_WORDS: int = 400
    KW: dict = {}

    @pytest.fixture(scope="class")
    def served(self, export):
        from tests.conftest import Harness

        h = Harness([export])
        yield h, h.registry.slots[0]
        h.close()

    @CONFORMANCE
    @given(data=st.data())
    def test_answers_alone_equal_answers_in_a_mixed_batch(self, served, data):
        h, slot = served
        check_batch_invariance(h, slot, data.draw(batches(self.MODEL, self.LIMITS, self.MAX_WORDS, **self.KW)))

    def test_the_limits_the_suite_draws_from_are_the_models(self, served):
        limits = served[1].model.limits()
        assert {k: limits[k] for k in self.LIMITS} == self.LIMITS

    def test_the_adapter_implements_the_contract(self, served):
        check_contract(served[1].model)
