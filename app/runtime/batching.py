"""The batching policy: which queued jobs share the next forward pass, and at which shape it runs.

The executor thread (app/runtime/executor.py) calls one `BatchPolicy` for every decision:

- **take** (`next_pass`): the oldest live job, plus every later job of the same model whose
  adapter says it may share the pass (`compatible`), within `max_batch_rows` rows and
  `max_batch_tokens` rows × longest row. Jobs of other models, or past the budgets, stay queued
  in order. Admission is by cost (rows × longest row), not only by age: while a job costing at
  most an eighth of the oldest's waits, the oldest cheap job leads the pass instead and only
  such cheap jobs join it, so a small request never waits behind queued large ones. A job is
  passed over only until the passes run ahead of it cost as much as it does, so none starves:
  cheap work at most doubles a costly job's wait for the device. And a job that alone costs over an
  eighth of the token budget shares no pass with another such job: passes that large gain
  little from batching, and the request behind them waits for the pass in flight.
- **admit** (`queue_tokens`): the queue holds at most `QUEUED_PASSES` passes' tokens (past that,
  503 `overloaded`). A pass takes what is queued the moment the device is free: under load the
  queue fills while a pass runs, and waiting for more only adds latency.
- **shape** (`pack`): a model with a graph policy gets the batch padded to the adapter's bucketed
  shapes, on every device (`ModelSlot.bucketed`: the CPU runs the shapes a GPU replays), while the
  pass is small (at most `cuda_graph_rows` rows and the model's token
  bound, `GraphPolicy.max_tokens`), since replay saves launch overhead only while a pass is
  launch-bound; a larger pass runs uncaptured at its own shape, where filler rows would cost more
  than replay saves. So does a pass whose adapter packs it at its own shape into fewer tokens
  than its bucketed shape holds, where that shape holds more than an uncaptured pass costs at
  least (`GraphPolicy.replay_tokens`: Laya packs several rows into one batch row). Once the
  graph budget is spent, a shape not yet captured also runs at its own shape.
  Models whose passes are one work each (`GraphPolicy.per_work`) are bounded per work.
- **micro-batches** (`pack`, `micro_batches`): for models that declare `MicroBatches` (rows that
  each end at their own last token: Cua-S1, Open-Jev, Clef-Flash's batched records), the take's
  rows are cut into runs of like lengths within the model's bounds, each padded only to its own
  longest row, run in turn in FIFO order; `Packed.ready` lets the executor answer a job after
  the part that completes it. A one-record Clef-Flash export runs one record a part.
- **capture** (`IdleCaptures`): no pass captures a CUDA graph. A bucketed shape without a graph
  runs uncaptured and, on the sighting its model's policy names, becomes a candidate; the
  executor thread captures candidates only while no job is queued, one at a time, most often
  seen first, and looks at its queue again after each. A request waits for at most the one
  capture in flight when it arrives, and a capture of t seconds is followed by 19·t without one
  (`CAPTURE_SHARE`), so captures take at most a twentieth of the thread's time while traffic
  keeps it busy.
- **precapture** (`precapture`): the shapes a model lists (`capture_batches`, fewest tokens
  first) are captured as it loads for at most `PRECAPTURE_S` seconds, within the same bounds as
  `pack`; the rest become candidates, captured when idle. Start-to-ready stays short, and the
  smallest shapes, which low concurrency brings most, are captured before the first request.
"""

from __future__ import annotations

import collections
import itertools
import logging
import time
from typing import TYPE_CHECKING, cast
from collections.abc import Callable, Iterable, Sequence

from models.base import CapturingAdapter, GraphPolicy, MicroBatchAdapter, MicroBatches, Packed, Prepared, ServedModel

if TYPE_CHECKING:
    from app.config import Settings
    from app.runtime.executor import Job
    from app.runtime.registry import ModelSlot
    from app.runtime.sessions import Feeds, GraphRunner, Run

log = logging.getLogger("omni.batching")

CHEAP_RATIO = 8  # a job costing at most 1/8 of the oldest's goes first
QUEUED_PASSES = 8  # the queue holds at most this many passes' tokens (max_tokens each)
PRECAPTURE_S = 2.5  # seconds of captures as a model loads, at most; its other shapes are captured when idle
CAPTURE_SHARE = 0.05  # the share of the executor thread's time that idle captures take, at most


def cost(job: Job) -> int:
    """A job's share of a pass: its rows × its longest row, in tokens."""
    return job.prepared.rows * job.prepared.longest


class BatchPolicy:
    def __init__(self, max_rows: int, max_tokens: int, graph_rows: int):
        self.max_rows, self.max_tokens, self.graph_rows = max_rows, max_tokens, graph_rows
        # What the queue may hold in tokens (and the memory of their prepared rows): a few passes'
        # worth. A request comes in on an empty queue however large it is.
        self.queue_tokens = QUEUED_PASSES * max_tokens

    @classmethod
    def from_settings(cls, settings: Settings) -> BatchPolicy:
        return cls(settings.max_batch_rows, settings.max_batch_tokens, settings.cuda_graph_rows)

    # -- which jobs ------------------------------------------------------------------------
    def next_pass(self, queue: collections.deque[Job], drop: Callable[[Job], None]) -> list[Job]:
        """Pop the jobs of the next pass off `queue` (the caller holds its lock); cancelled jobs
        met on the way are handed to `drop`."""
        return self._take(queue, drop)

    def _take(self, queue: collections.deque[Job], drop: Callable[[Job], None]) -> list[Job]:
        while queue and queue[0].cancelled:
            drop(queue.popleft())
        if not queue:
            return []
        head, bound, passed = self._cheap(queue)
        if head is None:
            head = queue.popleft()
        adapter = head.slot.model.adapter
        key = adapter.compatible(head.prepared)
        jobs, rows, longest = [head], head.prepared.rows, head.prepared.longest
        large = self.max_tokens // CHEAP_RATIO
        alone = cost(head) > large
        keep = []
        while queue:
            job = queue.popleft()
            if job.cancelled:
                drop(job)
                continue
            if (
                job.slot is head.slot
                and adapter.compatible(job.prepared) == key
                and (bound is None or cost(job) <= bound)
                and not (alone and cost(job) > large)
            ):
                r, n = rows + job.prepared.rows, max(longest, job.prepared.longest)
                if r <= self.max_rows and r * n <= self.max_tokens:
                    jobs.append(job)
                    rows, longest = r, n
                    continue
            keep.append(job)
        queue.extendleft(reversed(keep))
        spent = sum(cost(job) for job in jobs)
        for job in passed:
            job.passed_over += spent
        return jobs

    @staticmethod
    def _cheap(queue: collections.deque[Job]) -> tuple[Job | None, int | None, list[Job]]:
        """(the oldest live job costing at most 1/CHEAP_RATIO of the oldest's, taken off the
        queue; that cost bound; the jobs it passes over) while the oldest has been passed over by
        less than its own cost, else (None, None, [])."""
        oldest = queue[0]
        bound = cost(oldest) // CHEAP_RATIO
        if oldest.passed_over >= cost(oldest):
            return None, None, []
        for i, job in enumerate(queue):
            if not job.cancelled and cost(job) <= bound:
                passed = list(itertools.islice(queue, i))
                del queue[i]
                return job, bound, passed
        return None, None, []

    # -- at which shape --------------------------------------------------------------------
    def pack(self, slot: ModelSlot, prepared: Sequence[Prepared]) -> tuple[Packed, Run]:
        """The requests' works in the ORT session's input layout, and the call that runs each part.
        `slot`: the model, its ORT session and whether that replays static shapes (ModelSlot)."""
        model, session, policy = slot.model, slot.session, slot.model.cuda_graphs
        works = [p.work for p in prepared]

        def pack(static: bool = False) -> Packed:
            if model.micro_batches is None:
                return model.adapter.pack(works, static=static)
            return cast(MicroBatchAdapter, model.adapter).pack(works, static=static, parts=parts)

        parts: list[list[int]] | None = None
        if model.micro_batches is not None:
            adapter = cast(MicroBatchAdapter, model.adapter)
            lengths, owners = adapter.row_lengths(works)
            parts = micro_batches(lengths, owners, adapter.bucket, model.micro_batches)
        if not slot.bucketed:
            return pack(), session.run
        # A session that replays graphs counts every bucketed shape it runs (`run`); a pass at its
        # own shape is neither replayed nor counted (`run_uncaptured`). Other sessions run both alike.
        uncaptured = getattr(session, "run_uncaptured", session.run)
        each = [p.rows for p in prepared]
        rows = max(each) if policy is not None and policy.per_work else sum(each)
        if not self.captures(policy, rows, rows * max(p.longest for p in prepared)):
            return pack(), uncaptured
        if policy is not None and self.packs_tighter(model.adapter, works, policy.replay_tokens):
            return pack(), uncaptured
        packed = pack(static=True)
        takes = getattr(session, "takes", None)
        if takes is not None and not takes(packed.feeds):
            # The graph budget is spent and this shape is not captured: run the batch at its
            # own shape rather than pay for filler rows and columns with nothing saved.
            return pack(), uncaptured
        return packed, session.run

    def captures(self, policy: GraphPolicy | None, rows: int, tokens: int) -> bool:
        """Whether a pass of `rows` rows and `tokens` = rows × longest row is padded to a bucketed
        shape and replayed: small passes are launch-bound, so replay pays; large ones are not."""
        bound = policy.max_tokens if policy is not None else 0
        return rows <= self.graph_rows and (not bound or tokens <= bound)

    @staticmethod
    def packs_tighter(adapter: object, works: Sequence[object], floor: int) -> bool:
        """Whether the works' bucketed shape holds more batch tokens than both their own shape,
        as the adapter packs it, and `floor`, what an uncaptured pass costs at least
        (`GraphPolicy.replay_tokens`; adapters without `padded_tokens`, or a floor of 0: no)."""
        padded = getattr(adapter, "padded_tokens", None)
        if not floor or padded is None:
            return False
        return bool(padded(works, static=True) > max(padded(works), floor))

    def precapture(self, session: GraphRunner, model: ServedModel, seconds: float = PRECAPTURE_S) -> tuple[int, float]:
        """Capture the shapes the model's adapter lists (`capture_batches`, fewest tokens first)
        for at most `seconds`, or until the ORT session's graph budget is full: (graphs captured,
        seconds). The shapes left become the session's candidates (`want`), captured when the
        executor is idle. A failed capture (logged by the session) ends the captures at load."""
        t0, before = time.perf_counter(), len(session.graphs)
        policy = model.cuda_graphs
        stop = False
        adapter = cast(CapturingAdapter, model.adapter)
        for works in adapter.capture_batches(self.graph_rows, policy.max_tokens if policy else 0):
            if len(session.graphs) >= session.max_graphs:
                break
            feeds = model.adapter.pack(works, static=True).feeds
            if stop or time.perf_counter() - t0 >= seconds:
                session.want(feeds)
                continue
            stop = session.capture(feeds) is None and len(session.graphs) < session.max_graphs
        return len(session.graphs) - before, time.perf_counter() - t0


class IdleCaptures:
    """When the executor thread captures a CUDA graph, and which (see the module's **capture**).
    `wait` says how long until a capture is due, `pick` which, `spent` books one's time."""

    share = CAPTURE_SHARE

    def __init__(self) -> None:
        self.rest_until = 0.0

    @staticmethod
    def _best(slots: Iterable[ModelSlot]) -> tuple[ModelSlot, Feeds] | None:
        """(slot, feeds) of the candidate shape traffic brought most often, the one due first
        among equals, over the slots' sessions; None without one."""
        best: tuple[tuple[int, int], ModelSlot, Feeds] | None = None
        for slot in slots:
            runner = slot.session
            pending = getattr(runner, "pending", None)
            for order, (key, feeds) in enumerate(pending.items() if pending else ()):
                rank = (runner.sightings.get(key, 0), -order)
                if best is None or rank > best[0]:
                    best = (rank, slot, feeds)
        return None if best is None else best[1:]

    def wait(self, slots: Iterable[ModelSlot], now: float) -> float | None:
        """Seconds until a capture is due (0: now); None while there is no candidate."""
        if self._best(slots) is None:
            return None
        return max(0.0, self.rest_until - now)

    def pick(self, slots: Iterable[ModelSlot]) -> tuple[ModelSlot, Feeds] | None:
        """(slot, feeds) to capture now, or None."""
        return self._best(slots)

    def spent(self, seconds: float, now: float) -> None:
        """A capture took `seconds`, ending at `now`: none for a while (`share`)."""
        self.rest_until = now + seconds * (1.0 / self.share - 1.0)


# -- micro-batches ----------------------------------------------------------------------------
def micro_batches(
    lengths: Sequence[int], owners: Sequence[int], bucket: Callable[[int], int], limits: MicroBatches
) -> list[list[int]]:
    """Rows of `lengths` (owned by works `owners`, oldest first) cut into micro-batches: row
    indices a part, in run order. Rows go longest first into runs of at most `max_rows` rows and
    `max_tokens` padded tokens, each padded to `bucket` of its longest row; a row that would
    carry more than `max_row_padding` pads starts a new run, since past that one more pass costs
    less than the padding, and one long row never pads a batch of short ones. Runs go in the
    order of the oldest work each holds (shortest first among equals): FIFO, as jobs are taken,
    with each job answered after the part that completes it (`Packed.ready`)."""
    cut: list[list[int]] = []
    chunk: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        width = bucket(lengths[chunk[0]] if chunk else lengths[i])
        if chunk and (
            len(chunk) + 1 > limits.max_rows
            or (len(chunk) + 1) * width > limits.max_tokens
            or width - lengths[i] > limits.max_row_padding
        ):
            cut.append(chunk)
            chunk = []
        chunk.append(i)
    if chunk:
        cut.append(chunk)
    return sorted(cut, key=lambda c: (min(owners[i] for i in c), lengths[c[0]]))
