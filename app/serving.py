"""The decision service: resolve the model, prepare, queue for the executor, finish.

Used by the HTTP handler and by the warm-up that gates readiness, so warm-up exercises the
same path as every request.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any
from collections.abc import Callable, Coroutine, Mapping

from opentelemetry.trace import Span

from app import gc_pauses
from app.config import Settings
from app.metrics import Metrics
from app.problems import Problem, retry_later
from app.runtime.executor import BatchInfo, Executor, Job, Overloaded, Unavailable
from app.runtime.preparing import PrepareBatch
from app.runtime.registry import ModelSlot, Registry, SlotState
from app.timing import Timing
from app.tracing import Tracing
from models.errors import InferenceFailed, RequestError

log = logging.getLogger("omni.serving")


class Engine:
    def __init__(self, settings: Settings, registry: Registry, metrics: Metrics, tracing: Tracing | None = None):
        self.settings = settings
        self.registry = registry
        self.metrics = metrics
        self.tracing = tracing or Tracing(None)
        self.executor = Executor(
            settings,
            on_loaded=self._loaded_from_thread,
            on_batch=self._batch_from_thread,
            on_capture=self._capture_from_thread,
            on_pass_failed=lambda slot: metrics.executor_failures.labels(slot.name).inc(),
            tracer=self.tracing.tracer,
            on_drop=lambda job: metrics.dropped.labels(job.slot.name).inc(),
            on_fatal=lambda slot: metrics.ready.labels(slot.name).set(0),
        )
        self._loaded: dict[ModelSlot, asyncio.Event] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._warm_task: asyncio.Task[None] | None = None
        self._rewarming: set[asyncio.Task[None]] = set()
        self._preparing: dict[ModelSlot, PrepareBatch] = {}
        self.gc_pauses = gc_pauses.FullCollections(metrics.gc_full_collections)
        self.frozen_objects = 0

    # -- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        """Start loading and warming in the background; returns at once so /livez answers."""
        self._loop = asyncio.get_running_loop()
        log.info("event loop: %s.%s", type(self._loop).__module__, type(self._loop).__name__)
        warning = loop_warning(self._loop, self.settings.request_timeout_s)
        if warning:
            log.warning(warning)
        self.gc_pauses.start()
        self._loaded = {slot: asyncio.Event() for slot in self.registry.slots}
        self._preparing = {slot: PrepareBatch(slot.model, self._loop) for slot in self.registry.slots}
        for slot in self.registry.slots:  # every series exists from the start, at 0
            self.metrics.ready.labels(slot.name).set(0)
            self.metrics.executor_failures.labels(slot.name)
            self.metrics.recoveries.labels(slot.name)
            self.metrics.dropped.labels(slot.name)
        self.executor.start(self.registry.slots)
        self._warm_task = asyncio.create_task(self._warm_all(), name="omni-warmup")

    async def stop(self) -> None:
        if self._warm_task and not self._warm_task.done():
            self._warm_task.cancel()
        await asyncio.to_thread(self.executor.stop)
        await asyncio.to_thread(self.tracing.shutdown)  # flush what the batches recorded
        self.gc_pauses.stop()
        if self.frozen_objects:
            gc_pauses.unfreeze()  # what the server froze can be collected again
            self.frozen_objects = 0

    def _loaded_from_thread(self, slot: ModelSlot) -> None:
        if slot.graphs_captured:
            self.metrics.observe_captures(slot.name, slot.graphs_captured, slot.capture_s)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loaded_on_loop, slot)

    def _loaded_on_loop(self, slot: ModelSlot) -> None:
        """A model's sessions are built: the first time, `_warm_all` warms it in turn; after a
        rebuild, it is warmed up again at once."""
        event = self._loaded[slot]
        if not event.is_set():
            event.set()
        elif slot.state is SlotState.WARMING:
            self._rewarming.add(asyncio.create_task(self._warm(slot), name="omni-rewarm-" + slot.name))
            for task in [t for t in self._rewarming if t.done()]:
                self._rewarming.discard(task)

    def _batch_from_thread(self, info: BatchInfo, jobs: list[Job]) -> None:
        self.metrics.observe_batch(info)

    def _capture_from_thread(self, slot: ModelSlot, seconds: float) -> None:
        self.metrics.observe_captures(slot.name, 1, seconds)

    async def _warm_all(self) -> None:
        for slot in self.registry.slots:
            await self._loaded[slot].wait()
            if slot.state is not SlotState.WARMING:
                self.metrics.ready.labels(slot.name).set(0)
                continue
            await self._warm(slot)
        # Loaded and warm: what is alive now lives as long as the server.
        t0 = time.perf_counter()
        self.frozen_objects = gc_pauses.freeze()
        log.info(
            "froze %d objects out of garbage collection in %.0f ms",
            self.frozen_objects,
            (time.perf_counter() - t0) * 1000.0,
        )

    async def _warm(self, slot: ModelSlot) -> None:
        """The model's warm-up request(s) through the whole path, then ready; a failure takes it out
        of service, to be rebuilt (app/runtime/recovery.py). Its prepared request is kept as the
        probe the executor runs alone after a failed pass (`ModelSlot.probe`)."""
        t0 = time.perf_counter()
        body, profile = slot.model.warmup_body(), self.settings.profile
        try:
            for _ in range(self.settings.warmup_requests):
                await self.decide(body, profile, Timing(), slot=slot, warmup=True)
            probe = slot.model.prepare(body, profile)
        except Exception as exc:
            log.error("model %s failed its warm-up request: %s", slot.name, exc)
            self.metrics.ready.labels(slot.name).set(0)
            self.executor.fail_model(slot, "warm-up request failed: %s" % exc)
            return
        slot.warmup_ms = (time.perf_counter() - t0) * 1000.0
        slot.probe, slot.state = probe, SlotState.READY
        self.metrics.ready.labels(slot.name).set(1)
        if slot.recovery.attempts:
            log.warning(
                "model %s is back in service after %d rebuild(s): load %.0f ms, warm-up %.1f ms",
                slot.name,
                slot.recovery.attempts,
                slot.load_ms or 0,
                slot.warmup_ms,
            )
            slot.recovery.attempts, slot.error = 0, None
            self.metrics.recoveries.labels(slot.name).inc()
            return
        note = " (RANDOM WEIGHTS: answers are random)" if slot.model.manifest.get("random_weights") else ""
        log.info(
            "model %s ready on %s: load %.0f ms, warm-up %.1f ms%s",
            slot.name,
            slot.device,
            slot.load_ms or 0,
            slot.warmup_ms,
            note,
        )

    def _failed(self, slot: ModelSlot, span: Span | None, exc: Exception, detail: str) -> Problem:
        """500 `inference_failed`: logged with the cause, recorded on the span; the client learns
        nothing about paths or device state."""
        # A model's own failure (InferenceFailed) is a line; anything else raised in finishing is a bug
        # there, logged with its traceback.
        log.error("inference failed for model %s: %s", slot.name, exc, exc_info=not isinstance(exc, InferenceFailed))
        if span is not None:
            span.record_exception(exc)
        return Problem(500, "inference_failed", detail)

    # -- one request ----------------------------------------------------------------------
    def admit(self, unread: bool = False) -> None:
        """Refuse a request the queue cannot take before it costs anything (503 `overloaded`): before
        its body is decoded (`unread`: the connection is then closed, its body left unread) and
        again before it is prepared."""
        full = self.executor.full()
        if full is not None:
            problem = retry_later(
                503, "overloaded", "the server is at capacity: %s" % full, self.settings.retry_after_s
            )
            if unread:
                problem.headers["Connection"] = "close"
            raise problem

    def _serving_slot(self, body: Mapping[str, Any], slot: ModelSlot | None, warmup: bool, timing: Timing) -> ModelSlot:
        """The model the request names, ready and with room for it (a warm-up: the one given,
        as it is); the request's timing names it from here on, refusals included."""
        try:
            slot = slot or self.registry.resolve(body.get("model"))
        except RequestError as exc:
            raise Problem.from_request_error(exc) from None
        timing.model = slot.name
        if not warmup:
            if slot.state is not SlotState.READY:
                detail = ("model %s is %s" % (slot.name, slot.state.value)) + (
                    ": %s" % slot.error if slot.state is SlotState.FAILED else "; retry shortly"
                )
                raise retry_later(503, "not_ready", detail, self.settings.retry_after_s)
            self.admit()
        return slot

    async def decide(
        self,
        body: Mapping[str, Any],
        profile: str,
        timing: Timing,
        *,
        slot: ModelSlot | None = None,
        warmup: bool = False,
        offload: bool = False,
        disconnected: Callable[[], Coroutine[Any, Any, Any]] | None = None,
    ) -> tuple[ModelSlot, dict[str, Any]]:
        """`disconnected`: returns when the client has gone; it is watched once the job has been
        queued for WATCH_AFTER_S without being dispatched; if it fires, the answer is a 499 and
        the queued work is dropped before dispatch.

        `offload`: prepare on a worker thread. A large request can take seconds to validate and
        tokenize (tens of thousands of candidates, a 4 MiB state); on the event loop that would
        stall every other request of the single worker. Small ones stay inline, where a thread
        hop would cost more than it frees."""
        slot = self._serving_slot(body, slot, warmup, timing)
        model = slot.model
        span = timing.span
        if span is not None:
            span.set_attribute("omni.model", slot.name)
        try:
            with timing.stage("prepare"):
                prepared = await (
                    asyncio.to_thread(model.prepare, body, profile)
                    if offload
                    else self._preparing[slot].prepare(body, profile)
                )
        except RequestError as exc:
            raise Problem.from_request_error(exc) from None
        if span is not None:
            span.set_attributes({"omni.questions": prepared.questions, "omni.input_tokens": prepared.tokens})
        try:
            job: Job = self.executor.submit(slot, prepared, span=span)
        except Overloaded as exc:
            raise retry_later(
                503, "overloaded", "the server is at capacity: %s" % exc, self.settings.retry_after_s
            ) from None
        self.metrics.queue_depth.set(self.executor.depth())
        # One timer per request: a disconnect watcher for a job still queued after a while,
        # then the deadline (warm-up has none: a slow first run, CUDA init or autotuning, must
        # not fail readiness). Each cancels the job's future from a callback (a cancelled job is
        # dropped unrun if still queued), and this coroutine learns which from `job.outcome`.
        guard = _Guard(
            job,
            disconnected,
            None if warmup else self.settings.request_timeout_s - (time.perf_counter() - timing.start),
        )
        try:
            output = await job.future
        except asyncio.CancelledError:
            if job.outcome == "gone":
                self.metrics.disconnects.inc()
                raise Problem(
                    499, "client_disconnected", "the client closed the connection before its answer"
                ) from None
            if job.outcome == "expired":
                raise Problem(
                    504, "deadline_exceeded", "the request was not served within %g s" % self.settings.request_timeout_s
                ) from None
            raise
        except InferenceFailed as exc:
            raise self._failed(slot, span, exc, "the forward pass failed; the error is logged") from None
        except Unavailable as exc:
            raise retry_later(503, "not_ready", str(exc), self.settings.retry_after_s) from None
        finally:
            guard.cancel()
            if job.dispatched:
                timing.record("queue", job.enqueued_ns, job.dispatched_ns)
            if job.ran and job.batch is not None:  # a job that ran was in a batch
                timing.add("infer", job.ran - job.batch.started)
        try:
            with timing.stage("finish"):
                response = model.finish(
                    prepared,
                    output,
                    profile,
                    slot.name,
                    requested=body.get("model") if isinstance(body.get("model"), str) else None,
                )
        except Exception as exc:  # finishing is the model's: whatever it raises fails this request alone
            raise self._failed(slot, span, exc, "the model produced no usable output; the error is logged") from None
        response["x_served_by" if profile == "jev" else "served_by"] = slot.served_by()
        if not warmup:
            self.metrics.child(self.metrics.input_tokens, slot.name).inc(prepared.tokens)
            self.metrics.child(self.metrics.decisions, slot.name).inc(prepared.questions)
        return slot, response


def loop_warning(loop: asyncio.AbstractEventLoop, timeout_s: float) -> str | None:
    """What to tell the operator about the event loop Granian runs the app on, if anything."""
    if type(loop).__module__.split(".")[0] != "rloop":
        return None
    return (
        "serving on rloop, which keeps every cancelled timer's callback alive: each request's body timer "
        "and deadline (%g s) timer then stay in memory for good, and each full garbage collection walks "
        "them all, so its pauses grow with the requests served. Serve on uvloop: GRANIAN_LOOP=uvloop or "
        "granian --loop uvloop (make serve and the image do)" % timeout_s
    )


# A job dispatched within this long is never watched for a disconnect: at low load the pass
# starts first, and a watcher (a task, a receive() into the server, its cancellation) would cost
# the loop more than the whole queue wait. A job still queued past it is watched, so a client
# that leaves before dispatch still frees its place.
WATCH_AFTER_S = 0.01


class _Guard:
    """The request's one timer: first the disconnect watch, then the deadline."""

    __slots__ = ("job", "disconnected", "deadline", "handle", "watch", "watch_next")

    def __init__(
        self,
        job: Job,
        disconnected: Callable[[], Coroutine[Any, Any, Any]] | None,
        budget_s: float | None,
        watch_after_s: float = WATCH_AFTER_S,
    ):
        loop = job.loop
        now = loop.time()
        self.job: Job | None = job
        self.disconnected = disconnected
        self.watch: asyncio.Task[Any] | None = None
        self.deadline = None if budget_s is None else now + max(0.001, budget_s)
        # The first firing is the watch's unless the deadline comes first (or there is no watch).
        self.watch_next = disconnected is not None and (self.deadline is None or self.deadline > now + watch_after_s)
        first = now + watch_after_s if self.watch_next else self.deadline
        self.handle = None if first is None else loop.call_at(first, self._fire)

    def _fire(self) -> None:
        job = self.job
        self.handle = None
        if job is None or job.future.done():  # called off (a loop may still fire it)
            return
        if not self.watch_next:
            _expire(job)
            return
        self.watch_next = False
        disconnected = self.disconnected  # present whenever the watch fires first
        if not job.dispatched and disconnected is not None:
            self.watch = job.loop.create_task(disconnected())
            self.watch.add_done_callback(functools.partial(_abandon, job))
        if self.deadline is not None:
            self.handle = job.loop.call_at(self.deadline, self._fire)

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        if self.watch is not None:
            self.watch.cancel()
        # A loop may keep a cancelled timer's callback (this guard's `_fire`) alive (rloop does):
        # dropping these references leaves only this small object behind, not the request's job,
        # watcher task and protocol.
        self.job = self.disconnected = self.watch = self.handle = None


def _abandon(job: Job, watch: asyncio.Task[Any]) -> None:
    """The disconnect watcher ended: unless it was called off, the client is gone (a receive
    that fails has lost the connection too)."""
    if watch.cancelled():
        return
    watch.exception()  # retrieved, so a failed receive is not logged as unhandled
    if not job.future.done():
        job.outcome = "gone"
        job.future.cancel()


def _expire(job: Job) -> None:
    if not job.future.done():
        job.outcome = "expired"
        job.future.cancel()
