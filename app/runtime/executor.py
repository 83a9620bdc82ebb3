"""The executor thread: it owns every ONNX Runtime session and runs forward passes, oldest first
save where cheaper jobs go ahead of costly ones (app/runtime/batching.py).

Requests are admitted into a bounded queue (full → 503 `overloaded`). When the device frees up,
the thread asks the batching policy (app/runtime/batching.py) for the next pass's jobs and their
packed inputs, runs the pass (or its micro-batches in turn), and completes each caller's future
on its event loop. While the queue is empty it captures the CUDA graphs the policy says are due,
one at a time, looking at the queue again after each. A job cancelled before dispatch (deadline,
disconnect) is dropped unrun.

Failures stay as small as they can be. A pass that raises is run again in halves, down to single
requests, so only a request that fails alone gets an error. That request's model then runs its
own known-good warm-up request alone (`ModelSlot.probe`): if that passes, the request was at
fault and the model serves on; if not, the model is out of service (FAILED, its queued jobs 503)
and is rebuilt after a backoff (app/runtime/recovery.py), as is a model whose sessions cannot be
created. Nothing a client sends can take a model out of service. A watchdog
(app/runtime/watchdog.py) sees a pass or capture that hangs.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Sequence

from opentelemetry import trace

from app import logs
from app.runtime import sessions
from app.runtime.batching import PRECAPTURE_S, BatchPolicy, IdleCaptures, cost
from app.runtime.registry import ModelSlot, SlotState
from app.runtime.watchdog import Watchdog
from models.base import Packed, Prepared
from models import gdn_plan
from models.errors import InferenceFailed

if TYPE_CHECKING:
    import numpy as np

    from app.config import Settings
    from app.runtime.sessions import Feeds, Run

log = logging.getLogger("omni.executor")
# A job's future and what it is settled with (a result, or the exception it raises).
Settlement = tuple[asyncio.Future[Any], Any]


class Overloaded(Exception):
    pass


class Unavailable(Exception):
    """The job's model is out of service (FAILED): the job was not run, or its pass found the model
    broken. The client may retry (503 `not_ready`)."""


@dataclass
class BatchInfo:
    """What one forward pass did, shared by every job it served."""

    model: str
    size: int  # requests in the batch
    rows: int
    real_tokens: int
    padded_tokens: int
    device: str
    started: float
    ended: float
    meta: dict[str, Any] = field(default_factory=dict)
    # Seconds inside the ORT session's runs: the device's work, and after it the wait for the GIL,
    # which the event loop may hold (the rest of the pass is packing and unpacking).
    forward_s: float = 0.0


@dataclass(eq=False)
class Job:
    slot: ModelSlot
    prepared: Prepared
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    span: Any = None  # the request's span, for the batch span's links
    enqueued: float = field(default_factory=time.perf_counter)
    enqueued_ns: int = field(default_factory=time.time_ns)
    dispatched: float = 0.0
    dispatched_ns: int = 0
    ran: float = 0.0  # when its outputs were ready (its last part's end)
    batch: BatchInfo | None = None
    outcome: str = ""  # why the future was cancelled: "gone", "expired"
    passed_over: int = 0  # tokens of the cheaper, later jobs run before it
    # The id of the request it serves (submitted within the request's context), for the log.
    request_id: str | None = field(default_factory=logs.current_request.get)

    @property
    def cancelled(self) -> bool:
        return self.future.done()


class Executor:
    def __init__(
        self,
        settings: Settings,
        on_loaded: Callable[[ModelSlot], None] | None = None,
        on_batch: Callable[[BatchInfo, list[Job]], None] | None = None,
        tracer: trace.Tracer | None = None,
        on_drop: Callable[[Job], None] | None = None,
        on_fatal: Callable[[ModelSlot], None] | None = None,
        on_capture: Callable[[ModelSlot, float], None] | None = None,
        on_pass_failed: Callable[[ModelSlot], None] | None = None,
    ):
        self.settings = settings
        self.policy = BatchPolicy.from_settings(settings)
        self.captures = IdleCaptures()
        self._on_capture = on_capture
        self._on_drop = on_drop
        self._on_fatal = on_fatal
        self._on_pass_failed = on_pass_failed
        self.watchdog = Watchdog(settings.pass_timeout_s)
        self.tracer = tracer or trace.NoOpTracer()
        self._queue: collections.deque[Job] = collections.deque()
        self._queued_cost = 0  # rows × longest row over the queue (batching.cost)
        self._cv = threading.Condition()
        self._stopping = False
        self._pending_loads: list[ModelSlot] = []
        self._slots: list[ModelSlot] = []
        self._on_loaded = on_loaded
        self._on_batch = on_batch
        self._thread = threading.Thread(target=self._run, name="omni-executor", daemon=True)

    # -- called from the event loop -------------------------------------------------------
    def start(self, slots: list[ModelSlot]) -> None:
        self._pending_loads = list(slots)
        self._slots = list(slots)
        self._thread.start()
        self.watchdog.start()

    def full(self) -> str | None:
        """Why a request would be refused now, before it costs anything to prepare: the queue holds
        `queue_size` requests, or its tokens are at their bound. None: room for more."""
        queued = len(self._queue)
        if self._stopping:
            return "the server is shutting down"
        if queued >= self.settings.queue_size:
            return "%d requests are already waiting" % queued
        bound = self.policy.queue_tokens
        if queued and self._queued_cost >= bound:
            return "%d tokens are already waiting, at the bound of %d" % (self._queued_cost, bound)
        return None

    def liveness(self) -> list[str]:
        """What makes the process unable to serve, each in a sentence: the executor thread gone, a
        hung pass, a model that rebuilds have not brought back. Empty: alive."""
        out = []
        if self._thread.ident is not None and not self._thread.is_alive() and not self._stopping:
            out.append("the executor thread has stopped")
        hung = self.watchdog.hung()
        if hung:
            out.append(hung)
        for slot in self._slots:
            if slot.state is SlotState.FAILED and slot.recovery.exhausted:
                out.append(
                    "model %s is out of service after %d rebuilds: %s" % (slot.name, slot.recovery.attempts, slot.error)
                )
        return out

    def fail_model(self, slot: ModelSlot, reason: str) -> None:
        """Take `slot` out of service (from either thread) and schedule its rebuild."""
        with self._cv:
            if slot.state is SlotState.FAILED:
                return
            slot.state, slot.error, slot.probe = SlotState.FAILED, reason, None
            delay = slot.recovery.schedule(time.perf_counter())
            self._cv.notify()
        log.critical(
            "model %s is out of service: %s; its sessions are rebuilt in %.0f s (attempt %d)",
            slot.name,
            reason,
            delay,
            slot.recovery.attempts + 1,
        )
        if self._on_fatal:
            self._on_fatal(slot)

    def depth(self) -> int:
        return len(self._queue)

    def submit(self, slot: ModelSlot, prepared: Prepared, span: trace.Span | None = None) -> Job:
        loop = asyncio.get_running_loop()
        job = Job(slot, prepared, loop.create_future(), loop, span=span)
        with self._cv:
            if self._stopping:
                raise Overloaded("the server is shutting down")
            if len(self._queue) >= self.settings.queue_size:
                raise Overloaded("%d requests are already waiting" % len(self._queue))
            bound = self.policy.queue_tokens  # a request comes in on an empty queue however large
            if self._queue and self._queued_cost + cost(job) > bound:
                raise Overloaded(
                    "%d tokens are already waiting, and %d more would pass the bound of %d"
                    % (self._queued_cost, cost(job), bound)
                )
            self._queue.append(job)
            self._queued_cost += cost(job)
            self._cv.notify()
        return job

    def stop(self, timeout: float = 30.0) -> None:
        """Finish what is queued, then end the thread."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.watchdog.stop()

    # -- the executor thread --------------------------------------------------------------
    def _run(self) -> None:
        for slot in self._pending_loads:
            self._load(slot)
        while True:
            due = rebuild = None
            jobs: list[Job] = []
            with self._cv:
                while not self._queue and not self._stopping:
                    now = time.perf_counter()
                    rebuild, rebuild_wait = self._rebuild_due(now)
                    if rebuild is not None:
                        break
                    live = [s for s in self._slots if s.state is not SlotState.FAILED]
                    wait = self.captures.wait(live, now)
                    if wait == 0:
                        due = self.captures.pick(live)
                        break
                    waits = [w for w in (wait, rebuild_wait) if w is not None]
                    self._cv.wait(min(waits) if waits else None)
                if due is None and rebuild is None and not self._stopping:
                    rebuild, _ = self._rebuild_due(time.perf_counter())
                if due is None and rebuild is None:
                    if not self._queue and self._stopping:
                        return
                    jobs = self.policy.next_pass(self._queue, self._drop)
                    self._queued_cost = sum(cost(j) for j in self._queue)
            if rebuild is not None:
                self._rebuild(rebuild)
            elif due is not None:
                self._capture(*due)
            elif jobs:
                self._execute(jobs)

    def _rebuild_due(self, now: float) -> tuple[ModelSlot | None, float | None]:
        """(a model out of service whose rebuild is due now, else None; seconds until the next)."""
        pending = [(due, s) for s in self._slots if s.state is SlotState.FAILED and (due := s.recovery.due) is not None]
        if not pending:
            return None, None
        due, first = min(pending, key=lambda p: p[0])
        wait = due - now
        return (first, 0.0) if wait <= 0 else (None, wait)

    def _rebuild(self, slot: ModelSlot) -> None:
        """New sessions for a model out of service; the engine warms it up again (`on_loaded`)."""
        slot.recovery.attempts += 1
        slot.recovery.due = None
        log.warning(
            "model %s: rebuilding its sessions (attempt %d) after: %s", slot.name, slot.recovery.attempts, slot.error
        )
        slot.session = None  # the old session's memory goes before the new one's comes
        slot.static_shapes = slot.bucketed = False
        slot.state = SlotState.LOADING
        self._load(slot)

    def _capture(self, slot: ModelSlot, feeds: Feeds) -> None:
        """One CUDA graph, between passes (the queue was empty when it began)."""
        t0 = time.perf_counter()
        self.watchdog.begin("CUDA graph capture", slot.name)
        try:
            took = slot.session.capture(feeds)
        except Exception:  # the session logs and refuses a failed capture; this is a bug
            log.exception("model %s: capturing a CUDA graph failed", slot.name)
            slot.session.pending.pop(slot.session.shape_key(feeds), None)
            took = None
        finally:
            self.watchdog.end()
        now = time.perf_counter()
        self.captures.spent(now - t0, now)
        if took is not None and self._on_capture:
            self._on_capture(slot, took)

    def _load(self, slot: ModelSlot) -> None:
        t0 = time.perf_counter()
        try:
            # The model's policy says which shapes are worth a CUDA graph (models.base.GraphPolicy).
            policy = slot.model.cuda_graphs
            graphs = self.settings.cuda_graphs if policy is not None else 0
            dtype = gdn_plan.gdn_dtype(slot.model.manifest)
            plan = gdn_plan.plan_for(self.settings.cuda_gdn_plan, dtype, gdn_plan.shared_head(slot.model.manifest))
            note = gdn_plan.plan_note(slot.model.manifest, self.settings.cuda_gdn_plan, plan)
            if note:
                log.info("model %s: %s", slot.name, note)
            info = sessions.create(
                slot.model.onnx_path,
                self.settings.device,
                self.settings.intra_op_threads,
                graphs,
                capture_after=policy.capture_after if policy is not None else 1,
                gdn_plan=plan,
                float32=slot.model.manifest.get("weights_dtype", "float32") == "float32",
            )
        except Exception as exc:
            log.exception("model %s failed to load", slot.name)
            self.fail_model(slot, "session creation failed: %s" % exc)
        else:
            slot.session, slot.device, slot.runtime = info.session, info.device, info.runtime
            slot.provider, slot.static_shapes = info.provider, info.static_shapes
            slot.graphs_refused = info.graphs_refused
            slot.bucketed = graphs > 0 and info.graphs_refused is None
            captured = ""
            # Static shapes only come with a graph policy (graphs above are 0 without one). The
            # shapes not captured in the seconds given are captured when the executor is idle.
            if info.static_shapes and policy is not None and policy.precapture:
                seconds = PRECAPTURE_S if self.settings.cuda_graph_precapture else 0.0
                count, took = self.policy.precapture(slot.session, slot.model, seconds)
                slot.graphs_captured, slot.capture_s = count, took
                captured = " (%d CUDA graphs captured in %.0f ms, %d left to capture when idle)" % (
                    count,
                    took * 1000.0,
                    len(slot.session.pending),
                )
            slot.load_ms = (time.perf_counter() - t0) * 1000.0
            slot.state = SlotState.WARMING
            log.info("model %s loaded on %s in %.0f ms%s", slot.name, info.device, slot.load_ms, captured)
        if self._on_loaded:
            self._on_loaded(slot)

    def _drop(self, job: Job) -> None:
        if self._on_drop:
            self._on_drop(job)

    def _execute(self, jobs: list[Job]) -> None:
        """Run the jobs' pass. One that raises runs again in halves, down to single requests, so
        only a request that fails alone gets the error (`_failed_alone`)."""
        slot = jobs[0].slot
        if slot.state is SlotState.FAILED:
            _settle(jobs, _fail, [_unavailable(slot)] * len(jobs))
            return
        error, unanswered = self._pass(jobs)
        if error is None:
            return
        live = [job for job in unanswered if not job.cancelled]
        if len(jobs) == 1 or not live:
            self._failed_alone(slot, live, error)
        elif len(live) == 1:
            self._execute(live)  # alone now: does it fail by itself?
        else:
            half = len(live) // 2
            log.debug("model %s: running the %d requests of a failed pass again in halves", slot.name, len(live))
            self._execute(live[:half])
            self._execute(live[half:])

    def _failed_alone(self, slot: ModelSlot, jobs: list[Job], error: Exception) -> None:
        """A pass of one request failed. The model's own warm-up request, run alone, says whose
        fault it was: it passes, and the request gets its error while the model serves on; it
        fails, and the model is out of service (the request gets 503, as do those queued)."""
        probe = self._probe(slot)
        ids = _ids(jobs)
        if probe is None:
            log.error(
                "model %s: request %s failed alone, and the model's own warm-up request passes, so the "
                "request is answered with its error and the model serves on: %s",
                slot.name,
                ids,
                error,
            )
            _settle(jobs, _fail, [_failure(error)] * len(jobs))
            return
        if slot.state is SlotState.READY:
            self.fail_model(
                slot,
                "a forward pass failed (%s), and then the model's own warm-up request failed "
                "alone: %s" % (str(error)[:200], str(probe)[:200]),
            )
            _settle(jobs, _fail, [_unavailable(slot)] * len(jobs))
            return
        # Still warming up: this is the warm-up request, whose failure the engine reports.
        _settle(jobs, _fail, [_failure(error)] * len(jobs))

    def _probe(self, slot: ModelSlot) -> Exception | None:
        """Run the model's warm-up request alone through pack, the session and unpack: None if it
        passes, else what it raised (also when the model has none yet)."""
        if slot.probe is None:
            return InferenceFailed("model %s has no warm-up request that passed" % slot.name)
        if slot.session is None:
            return InferenceFailed("model %s has no ONNX Runtime session" % slot.name)
        self.watchdog.begin("forward pass", slot.name, ["warm-up request"])
        try:
            packed, run = self.policy.pack(slot, [slot.probe])
            outputs = run(None, packed.feeds) if packed.parts is None else [run(None, f) for f in packed.parts]
            slot.model.adapter.unpack(outputs, [slot.probe.work], packed)
        except Exception as exc:
            log.exception("model %s: its own warm-up request failed alone", slot.name)
            return exc
        finally:
            self.watchdog.end(passed=False)
        return None

    def _pass(self, jobs: list[Job]) -> tuple[Exception | None, list[Job]]:
        """One forward pass for `jobs`: (None, []) when every job was answered, else (what the pass
        raised, the jobs it left unanswered: a job answered after its own micro-batch stays so)."""
        slot = jobs[0].slot
        adapter = slot.model.adapter
        started, started_ns = time.perf_counter(), time.time_ns()
        for job in jobs:
            job.dispatched, job.dispatched_ns = started, started_ns
        traced = [j.span for j in jobs if j.span is not None]
        # Untraced work (warm-up, tracing off, requests not sampled) gets no batch span; a batch
        # span is the child of the oldest traced request, linked to every traced one.
        span = (
            trace.INVALID_SPAN
            if not traced
            else self.tracer.start_span(
                "execute",
                start_time=started_ns,
                context=trace.set_span_in_context(traced[0]),
                links=[trace.Link(s.get_span_context()) for s in traced if s.get_span_context().is_valid],
                attributes={
                    "omni.model": slot.name,
                    "omni.device": slot.device or "",
                    "omni.batch.requests": len(jobs),
                    "omni.session.provider": slot.provider or "",
                },
            )
        )
        settled: set[int] = set()  # jobs answered already, after their own micro-batch
        self.watchdog.begin("forward pass", slot.name, [j.request_id for j in jobs])
        try:
            if slot.session is None:
                raise InferenceFailed("model %s has no ONNX Runtime session: %s" % (slot.name, slot.error))
            works = [j.prepared.work for j in jobs]
            packed, run = self.policy.pack(slot, [j.prepared for j in jobs])
            info = BatchInfo(
                slot.name,
                len(jobs),
                packed.rows,
                packed.real_tokens,
                packed.padded_tokens,
                slot.device or "?",
                started,
                0.0,
                packed.meta,
            )
            for job in jobs:
                job.batch = info
            run = _timed(run, info)
            if packed.parts is None:
                outputs = run(None, packed.feeds)
                results = adapter.unpack(outputs, works, packed)
            else:
                results = self._run_parts(jobs, works, packed, packed.parts, run, settled)
        except Exception as exc:
            self.watchdog.end(passed=False)
            span.record_exception(exc)
            span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)[:200]))
            span.end()
            if len(jobs) > 1:
                log.exception(
                    "a pass of %d requests for %s failed (requests %s); running them again in halves",
                    len(jobs),
                    slot.name,
                    _ids(jobs),
                )
            else:
                log.exception("batch of %d requests for %s failed (requests %s)", len(jobs), slot.name, _ids(jobs))
            if self._on_pass_failed:
                self._on_pass_failed(slot)
            return exc, [job for i, job in enumerate(jobs) if i not in settled]
        self.watchdog.end()
        ended = time.perf_counter()
        span.set_attributes(
            {
                "omni.batch.rows": packed.rows,
                "omni.batch.real_tokens": packed.real_tokens,
                "omni.batch.padded_tokens": packed.padded_tokens,
                **{"omni.batch." + k: v for k, v in packed.meta.items()},
            }
        )
        span.end()
        info.ended = ended
        rest = [job for i, job in enumerate(jobs) if i not in settled]
        for job in rest:
            job.ran = ended
        _settle(rest, _succeed, results)
        if self._on_batch:
            self._on_batch(info, jobs)
        return None, []

    @staticmethod
    def _run_parts(
        jobs: list[Job], works: list[Any], packed: Packed, parts: list[Feeds], run: Run, settled: set[int]
    ) -> list[Any]:
        """Run the micro-batches in turn. Where the adapter says after which part each work is
        complete (`Packed.ready`), answer those jobs then (their indices go into `settled`);
        `parts`: the pass's micro-batches (`packed.parts`, present);
        returns the results of the jobs not yet answered, in order."""
        adapter, ready = jobs[0].slot.model.adapter, packed.ready
        outputs: list[list[np.ndarray]] = []
        for k, feeds in enumerate(parts):
            outputs.append(run(None, feeds))
            if ready is None or k == len(parts) - 1:
                continue
            done = [i for i, r in enumerate(ready) if r == k]
            if done:
                early = adapter.unpack(outputs, works, packed, only=done)
                now = time.perf_counter()
                for i in done:
                    jobs[i].ran = now
                settled.update(done)
                _settle([jobs[i] for i in done], _succeed, early)
        if ready is None:
            return adapter.unpack(outputs, works, packed)
        return adapter.unpack(outputs, works, packed, only=[i for i in range(len(jobs)) if i not in settled])


def _failure(error: Exception) -> InferenceFailed:
    """What a request that failed alone hears: the model's own error, or the pass's wrapped in one."""
    return error if isinstance(error, InferenceFailed) else InferenceFailed(str(error))


def _unavailable(slot: ModelSlot) -> Unavailable:
    return Unavailable("model %s is out of service: %s" % (slot.name, slot.error))


def _settle(jobs: list[Job], how: Callable[[list[Settlement]], None], values: Sequence[Any]) -> None:
    """Complete a batch's futures with one wake-up of each event loop, not one per job."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Settlement]] = {}
    for job, value in zip(jobs, values, strict=True):
        by_loop.setdefault(job.loop, []).append((job.future, value))
    for loop, pairs in by_loop.items():
        loop.call_soon_threadsafe(how, pairs)


def _succeed(pairs: list[Settlement]) -> None:
    for future, value in pairs:
        if not future.done():
            future.set_result(value)


def _fail(pairs: list[Settlement]) -> None:
    for future, error in pairs:
        if not future.done():
            future.set_exception(error)


def _timed(run: Run, info: BatchInfo) -> Run:
    """`run`, adding the seconds each call takes to `info.forward_s`."""

    def timed(names: Sequence[str] | None, feeds: Feeds) -> list[np.ndarray]:
        t0 = time.perf_counter()
        try:
            return run(names, feeds)
        finally:
            info.forward_s += time.perf_counter() - t0

    return timed


def _ids(jobs: list[Job], shown: int = 8) -> str:
    """The jobs' request ids for a log line: the first `shown`, then how many more."""
    ids = ", ".join(job.request_id or "-" for job in jobs[:shown])
    return ids if len(jobs) <= shown else "%s and %d more" % (ids, len(jobs) - shown)
