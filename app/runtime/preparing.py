"""Preparation of the requests that reach the event loop in one turn, in one call.

A request's preparation (validate, render, tokenize) runs on the event loop, and one worker's
loop bounds the server's throughput. Its tokenizer call is the largest part (22% of the loop's
samples on the H200 at c=64, docs/benchmarks.md) and has a fixed cost per call that one call for
many texts shares; it also lets go of the GIL while it works. So a small request does not
prepare at once: it waits for the end of the loop's current turn, and every request that arrived
in that turn is prepared by one `model.prepare_many`. At c=1 that costs one future and one turn.

With a tokenizer thread (`OMNI_TOKENIZE_OFF_LOOP`, off by default), a turn of at least
`OFF_LOOP_MIN` requests has its tokenizer call made on that thread (`model.prepare_stages`), and
the loop serves other requests meanwhile: the call was 18% of the loop's samples through RSGI at
c=64 on the H200 (RSGI session). The validation before it and the rows after it stay on the loop.
Once a turn's call is on the thread, later turns' calls follow it there until it is idle again,
so requests are prepared, and queued for the executor, in the order they arrived. Smaller turns
(c=1) stay whole on the loop, where a thread hop would add to their latency.
"""
from __future__ import annotations

import asyncio
import functools
from concurrent.futures import Executor
from typing import Any, Mapping

OFF_LOOP_MIN = 4


class PrepareBatch:
    """One model's requests waiting for the end of the current loop turn."""

    __slots__ = ("model", "loop", "pending", "tokenizer_thread", "off_loop")

    def __init__(self, model, loop: asyncio.AbstractEventLoop, tokenizer_thread: Executor | None = None):
        self.model, self.loop, self.pending = model, loop, []
        self.tokenizer_thread = tokenizer_thread        # one worker: calls run in turn order
        self.off_loop = 0                               # tokenizer calls on that thread now

    def prepare(self, body: Mapping[str, Any]) -> asyncio.Future:
        """A future of the request's Prepared, or of the error its preparation raised."""
        future = self.loop.create_future()
        if not self.pending:
            self.loop.call_soon(self._flush)   # after the callbacks already due in this turn
        self.pending.append((body, future))
        return future

    def _flush(self) -> None:
        pending, self.pending = self.pending, []
        bodies = [body for body, _ in pending]
        try:
            if self.tokenizer_thread is not None and (len(pending) >= OFF_LOOP_MIN or self.off_loop):
                stages = self.model.prepare_stages(bodies)
                if stages is not None and stages.texts:
                    self.off_loop += 1
                    call = self.loop.run_in_executor(self.tokenizer_thread, stages.tokenize, stages.texts)
                    call.add_done_callback(functools.partial(self._tokenized, pending, stages))
                    return
                results = stages.complete([]) if stages is not None else self.model.prepare_many(bodies)
            else:
                results = self.model.prepare_many(bodies)
        except BaseException as exc:          # the preparation itself broke: every request hears it
            results = [exc] * len(pending)
        _settle(pending, results)

    def _tokenized(self, pending: list, stages, call: asyncio.Future) -> None:
        self.off_loop -= 1
        try:
            results = stages.complete(call.result())
        except BaseException as exc:
            results = [exc] * len(pending)
        _settle(pending, results)


def _settle(pending: list, results: list) -> None:
    for (_, future), result in zip(pending, results):
        if future.done():
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)
