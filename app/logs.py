"""The process's logging: one format, the request id on every line written while serving a
request, and one access line per request.

The request-context layer (app/middleware.py) sets the request's id in a context variable as the
request opens; every request runs in its own context, so a line logged by anything that serves
it (a handler, the engine, a library) carries the id. Lines of the executor thread serve whole
batches and carry none.

`OMNI_LOG_FORMAT`: `text` (the default) writes `time level logger [request id]: message`; `json`
writes one JSON object a line, with the access line's fields as keys.
"""

from __future__ import annotations

import contextvars
import logging
import re
import sys
import time
from types import TracebackType
from typing import TextIO

import msgspec

from app.config import LOG_FORMATS

ACCESS = "omni.access"

current_request: contextvars.ContextVar[str | None] = contextvars.ContextVar("omni_request_id", default=None)
access_log = logging.getLogger(ACCESS)

# The access line's fields, in the order the text format writes them after the message.
_ACCESS_TEXT = ("model", "trace_id")
# Control characters a message may carry from a request (a percent-decoded path, a client's text):
# the text format writes them escaped, so one record is one line and no client forges another.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# What `sys.exc_info()` gives, as logging's formatException takes it.
ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]


def _escaped(char: re.Match[str]) -> str:
    return "\\x%02x" % ord(char.group())


class RequestIdFilter(logging.Filter):
    """Gives every record `request_id`: the id of the request being served where the record was
    made, else None. On the handler, so records of every logger pass it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = current_request.get()
        return True


def _indented(text: str) -> str:
    """A traceback or stack under its record: every line indented, so none can stand at the
    start of a line as a record of its own (an exception's message may quote a client's text),
    and control characters escaped as in messages (line breaks, of any kind, end a line)."""
    return "\n".join("  " + _CONTROL.sub(_escaped, line) for line in text.splitlines())


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(rid)s: %(message)s")
        self._second, self._stamp = -1, ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        second = int(record.created)
        if second != self._second:  # one local-time conversion a second, not a line
            self._second, self._stamp = second, time.strftime("%Y-%m-%d %H:%M:%S", self.converter(second))
        return "%s,%03d" % (self._stamp, record.msecs)

    def formatMessage(self, record: logging.LogRecord) -> str:
        rid = getattr(record, "request_id", None)
        record.rid = " [%s]" % rid if rid else ""
        fields = getattr(record, "access", None)
        if fields is not None:
            record.message = "%s %s %d %.3f ms %s" % (
                fields["method"],
                fields["route"],
                fields["status"],
                fields["duration_ms"],
                " ".join("%s=%s" % (k, fields[k] or "-") for k in _ACCESS_TEXT),
            )
        elif _CONTROL.search(record.message):
            record.message = _CONTROL.sub(_escaped, record.message)
        return super().formatMessage(record)

    def formatException(self, ei: ExcInfo) -> str:
        return _indented(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _indented(super().formatStack(stack_info))


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, ISO 8601), level, logger, message, request_id where
    there is one, the access line's fields, and a traceback as `exception`."""

    def __init__(self) -> None:
        super().__init__()
        self._second, self._stamp = -1, ""

    def format(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._second:  # one UTC conversion a second, not a line
            self._second, self._stamp = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        out = {
            "time": "%s.%03dZ" % (self._stamp, record.msecs),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", None)
        if rid:
            out["request_id"] = rid
        fields = getattr(record, "access", None)
        if fields is not None:
            out.update(fields)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return msgspec.json.encode(out).decode()


class OmniHandler(logging.StreamHandler[TextIO]):
    """The root handler `configure` installs (and replaces when called again)."""


def configure(fmt: str = "text", stream: TextIO | None = None) -> logging.Handler:
    """The root logger writes `fmt` lines to `stream` (stderr) at INFO; Granian's own loggers in
    this process write through it too. Returns the handler."""
    if fmt not in LOG_FORMATS:
        raise ValueError("OMNI_LOG_FORMAT must be one of %s, got %r" % ("/".join(LOG_FORMATS), fmt))
    handler = OmniHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, OmniHandler)]:  # a previous configure's
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for name in ("_granian", "granian.access"):
        granian = logging.getLogger(name)
        for theirs in list(granian.handlers):
            granian.removeHandler(theirs)
        granian.propagate = True
    return handler


def access(method: str, route: str, model: str, status: int, duration_s: float, trace_id: str) -> None:
    """The access line of one request (its id comes from the request's context). Made and handed
    to the handlers directly: a caller lookup per request would cost the loop for nothing."""
    if access_log.isEnabledFor(logging.INFO):
        record = access_log.makeRecord(ACCESS, logging.INFO, __file__, 0, "%s %s %d", (method, route, status), None)
        record.access = {
            "method": method,
            "route": route,
            "model": model or None,
            "status": status,
            "duration_ms": round(duration_s * 1000.0, 3),
            "trace_id": trace_id or None,
        }
        access_log.handle(record)
