"""Python's garbage collector and the server (app/gc_pauses.py): the long-lived objects frozen
once the models are warm, returned at shutdown, and each full collection's pause a metric."""

from __future__ import annotations

import asyncio
import gc

from prometheus_client import CollectorRegistry, Histogram

from app import gc_pauses
from app.config import Settings
from app.main import create_app
from tests.app.test_http import BODY
from tests.app.test_tracing import _with_client


def _count(histogram) -> float:
    return next(s.value for m in histogram.collect() for s in m.samples if s.name.endswith("_count"))


def test_freeze_moves_what_is_alive_out_of_collection_and_unfreeze_returns_it():
    alive = [[i] for i in range(1000)]  # containers the collector tracks
    try:
        frozen = gc_pauses.freeze()
        # The count can only fall after: a frozen object whose last reference goes (another
        # thread's, in a full suite) leaves it (clean-clone CI saw 636,023 then 636,021).
        assert frozen >= gc.get_freeze_count() >= len(alive)
        collectable = {id(o) for generation in (0, 1, 2) for o in gc.get_objects(generation)}
        assert all(gc.is_tracked(x) and id(x) not in collectable for x in alive)
    finally:
        gc_pauses.unfreeze()
    assert gc.get_freeze_count() == 0


def test_each_full_collection_and_only_those_is_observed_while_started():
    histogram = Histogram("pauses", "full collections", registry=CollectorRegistry())
    watch = gc_pauses.FullCollections(histogram)
    watch.start()
    watch.start()  # once, however often started
    try:
        gc.collect(0)
        gc.collect(1)
        assert _count(histogram) == 0
        gc.collect(2)
        gc.collect(2)
        assert _count(histogram) == 2
        assert next(s.value for m in histogram.collect() for s in m.samples if s.name.endswith("_sum")) > 0
    finally:
        watch.stop()
    gc.collect(2)
    assert _count(histogram) == 2 and watch._callback not in gc.callbacks


def _serve(settings: Settings):
    app = create_app(settings)
    seen = {}

    async def go(client):
        assert (await client.post("/v1/systemone", json=BODY)).status_code == 200
        engine = app.state.omni.engine
        seen["frozen"], seen["freeze_count"] = engine.frozen_objects, gc.get_freeze_count()
        gc.collect()
        seen["metrics"] = (await client.get("/metrics")).text

    asyncio.run(_with_client(app, go))
    seen["after"] = gc.get_freeze_count()
    return seen


def test_a_warm_server_has_frozen_its_objects_and_returns_them_when_it_stops(english):
    seen = _serve(Settings(models=(english[1],)))
    assert seen["frozen"] > 1000 and seen["freeze_count"] > 1000  # (refcounting still frees some)
    assert seen["after"] == 0
    assert _scraped_count(seen["metrics"]) >= 2  # the freeze's collection and the test's


def _scraped_count(text: str) -> float:
    (line,) = [x for x in text.splitlines() if x.startswith("omni_gc_full_collection_seconds_count")]
    return float(line.split()[-1])
