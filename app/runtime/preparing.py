"""Preparation of the requests that reach the event loop in one turn, in one call.

A request's preparation (validate, render, tokenize) runs on the event loop, and one worker's
loop bounds the server's throughput. Its tokenizer call is the largest part and has a fixed
cost per call that one call for many texts shares; it also lets go of the GIL while it works. So
a small request does not prepare at once: it waits for the end of the loop's current turn, and
every request that arrived in that turn is prepared by one `model.prepare_many`. At c=1 that
costs one future and one turn.
"""

from __future__ import annotations

import asyncio
from typing import Any
from collections.abc import Mapping

from models.base import Prepared, ServedModel


class PrepareBatch:
    """One model's requests waiting for the end of the current loop turn."""

    __slots__ = ("model", "loop", "pending")

    def __init__(self, model: ServedModel, loop: asyncio.AbstractEventLoop):
        self.model, self.loop = model, loop
        self.pending: list[tuple[Mapping[str, Any], str, asyncio.Future[Prepared]]] = []

    def prepare(self, body: Mapping[str, Any], profile: str = "reference") -> asyncio.Future[Prepared]:
        """A future of the request's Prepared, or of the error its preparation raised."""
        future = self.loop.create_future()
        if not self.pending:
            self.loop.call_soon(self._flush)  # after the callbacks already due in this turn
        self.pending.append((body, profile, future))
        return future

    def _flush(self) -> None:
        pending, self.pending = self.pending, []
        try:
            results = self.model.prepare_many(
                [body for body, _, _ in pending], profiles=[profile for _, profile, _ in pending]
            )
        except BaseException as exc:  # prepare_many itself broke: every request hears it
            results = [exc] * len(pending)
        for (_, _, future), result in zip(pending, results, strict=True):
            if future.done():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
