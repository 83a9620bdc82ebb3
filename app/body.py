"""Read, decompress and parse a JSON request body under the configured limits.

The size limit is checked from `Content-Length` before any byte is read, then again while
streaming (chunked bodies), and again after decompression (bombs). The parse is strict where
the tokens depend on it: duplicate keys, NaN/Infinity, invalid UTF-8 and lone surrogates are
400s, never passed on to a model.

Bytes are not what a body costs: 32 KiB of gzip can expand to ten million empty arrays, each a
Python object to build, walk and render. So a body's JSON values are counted from its bytes
before it is decoded (`check_values`), and a body past `max_body_values` is a 413. A body over
`OFFLOAD_BYTES`, before or after decompression, is decompressed, counted and decoded on a worker
thread, so that the event loop goes on answering other requests meanwhile.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import sys
import zlib
from typing import Any, NoReturn
from collections.abc import Awaitable, Callable, Mapping

import msgspec
import numpy as np
from granian.rsgi import HTTPProtocol, ProtocolClosed, ProtocolError

from app.config import Settings
from app.problems import Problem, malformed
from models.nesting import nests_deeper, too_deep_detail
from models.render import json_kind

_ENCODINGS = ("identity", "gzip", "x-gzip", "zstd")
# A body larger than this, compressed or not, is decoded off the event loop, and its request
# prepared off it too (app/routes/systemone.py).
OFFLOAD_BYTES = 64 * 1024


def _too_large(limit: int, what: str = "body", unread: bool = False) -> Problem:
    # A body left unread makes the connection unusable: tell the client not to reuse it.
    return Problem(
        413,
        "too_large",
        "request %s is over the %d-byte limit" % (what, limit),
        headers={"Connection": "close"} if unread else None,
    )


def check_headers(headers: Mapping[str, str], settings: Settings) -> str:
    """Validate content type, encoding and declared length; returns the content encoding."""
    ctype = headers.get("content-type", "")
    media = ctype.split(";", 1)[0].strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        raise Problem(
            415, "unsupported_media_type", "Content-Type must be application/json, got %r" % (ctype or "nothing")
        )
    encoding = headers.get("content-encoding", "identity").strip().lower() or "identity"
    if encoding not in _ENCODINGS:
        raise Problem(415, "unsupported_media_type", "unknown Content-Encoding %r; use gzip, zstd or none" % encoding)
    length = headers.get("content-length")
    if length is not None:
        try:
            declared = int(length)
        except ValueError:
            raise malformed("Content-Length %r is not a number" % length) from None
        if declared < 0:
            raise malformed("Content-Length must not be negative")
        if declared > settings.max_body_bytes:
            raise _too_large(settings.max_body_bytes, unread=True)
    elif "chunked" not in headers.get("transfer-encoding", "").lower():
        raise Problem(411, "length_required", "a request body needs Content-Length or chunked transfer")
    return encoding


async def read_raw(receive: Callable[[], Awaitable[Mapping[str, Any]]], settings: Settings) -> bytes:
    """The body bytes from the ASGI `receive` channel (see read_chunks)."""

    async def next_chunk() -> tuple[bytes, bool]:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _gone()
        return message.get("body", b""), message.get("more_body", False)

    return await read_chunks(next_chunk, settings)


async def read_rsgi(proto: HTTPProtocol, headers: Mapping[str, str], settings: Settings) -> bytes:
    """The body bytes from Granian's RSGI protocol object (see read_chunks): in one piece when
    the length is declared (check_headers has bounded it), else chunk by chunk."""
    if "content-length" in headers:

        async def next_chunk() -> tuple[bytes, bool]:
            try:
                return await proto(), False
            except RSGI_CLOSED:
                raise _gone() from None
    else:
        chunks = proto.__aiter__()

        async def next_chunk() -> tuple[bytes, bool]:
            try:
                return await chunks.__anext__(), True
            except StopAsyncIteration:
                return b"", False
            except RSGI_CLOSED:
                raise _gone() from None

    return await read_chunks(next_chunk, settings)


async def read_chunks(next_chunk: Callable[[], Awaitable[tuple[bytes, bool]]], settings: Settings) -> bytes:
    """The body, at most `max_body_bytes`, within `body_timeout_s` (else 408); `next_chunk()`
    gives (bytes, more to come). One timer handle bounds the wait, cheaper per request than
    asyncio.timeout's context manager; every request pays it, since Granian hands even a small
    body over through the loop."""
    chunks, size = [], 0
    task = asyncio.current_task()
    expired = False

    def expire() -> None:
        nonlocal expired
        if task is not None:
            expired = True
            task.cancel()

    timer = asyncio.get_running_loop().call_later(settings.body_timeout_s, expire)
    try:
        while True:
            chunk, more = await next_chunk()
            if chunk:
                size += len(chunk)
                if size > settings.max_body_bytes:
                    raise _too_large(settings.max_body_bytes, unread=True)
                chunks.append(chunk)
            if not more:
                break
    except asyncio.CancelledError:
        if not expired or task is None:  # `expired`: our timer cancelled this task
            raise
        task.uncancel()  # this cancellation was ours, and it ends here
        raise Problem(
            408,
            "request_timeout",
            "the body did not arrive within %g s" % settings.body_timeout_s,
            headers={"Connection": "close"},
        ) from None
    finally:
        timer.cancel()
        # A loop may keep a cancelled timer's callback alive (rloop keeps it for good): `expire`
        # must not hold the request's task once the body is read.
        task = None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


# What Granian's RSGI protocol raises once the connection has gone.
RSGI_CLOSED = (ProtocolClosed, ProtocolError)


def _gone() -> Problem:
    return Problem(499, "client_disconnected", "the client closed the connection before its body")


def decompress(data: bytes, encoding: str, limit: int) -> bytes:
    out = inflate(data, encoding, limit)
    if out is None:
        raise _too_large(limit, "body after decompression")
    return out


def inflate(data: bytes, encoding: str, limit: int) -> bytes | None:
    """The decompressed body, or None where it is over `limit` bytes."""
    if encoding == "identity":
        return data if len(data) <= limit else None
    try:
        if encoding in ("gzip", "x-gzip"):
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = d.decompress(data, limit + 1)
            if len(out) > limit:
                return None
            if not d.eof:
                raise malformed("gzip body is truncated")
            return out
        import zstandard

        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        out = reader.read(limit + 1)
        return None if len(out) > limit else out
    except Problem:
        raise
    except (zlib.error, gzip.BadGzipFile, EOFError, OSError, ValueError) as exc:
        raise malformed("body is not valid %s data: %s" % (encoding, exc)) from None
    except Exception as exc:  # zstandard.ZstdError and kin
        raise malformed("body is not valid %s data: %s" % (encoding, exc)) from None


def count_values(data: bytes, chunk: int = 1 << 20) -> int:
    """How many JSON values `data` holds, near enough: the `[`, `{` and `,` outside its strings
    (each array and object, and each item after its first). numpy counts a chunk at a time, so
    that a worker thread counting 32 MiB lets go of the GIL between and within chunks."""
    if b"\\" in data:  # escapes: pairs of backslashes go first, then escaped quotes
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    a = np.frombuffer(data, np.uint8)
    total, inside = 0, 0
    for start in range(0, len(a), chunk):
        c = a[start : start + chunk]
        quote = c == 34
        outside = (np.cumsum(quote, dtype=np.uint8) & 1) == inside  # quotes so far, mod 2
        total += int(np.count_nonzero(((c == 44) | (c == 91) | (c == 123)) & outside))
        inside ^= int(np.count_nonzero(quote)) & 1
    return total


def check_values(data: bytes, limit: int) -> None:
    """413 `too_large` where the body holds over `limit` JSON values. The bytes bound the count
    (a small body never gets counted), then `,`, `[` and `{` anywhere bound it; only a body past
    both is counted exactly, outside its strings."""
    if len(data) <= limit:
        return
    if data.count(b",") + data.count(b"[") + data.count(b"{") <= limit:
        return
    if count_values(data) > limit:
        raise Problem(
            413,
            "too_large",
            "request body holds over %d JSON values (arrays, objects and their items); send fewer" % limit,
        )


def _parse_plain(data: bytes) -> dict[str, Any] | None:
    """The common body, decoded by msgspec in one pass (no Python hook per value), or None
    for the strict path, which also words every error. msgspec itself refuses what the strict
    path refuses (NaN, Infinity, out-of-range numbers, bad UTF-8, lone surrogates, trailing
    data) except duplicate keys, which it merges: every key is followed by one ':' and any other
    ':' sits inside a string, so a body whose decoded objects hold as many keys as it has ':'
    bytes has none. Bodies with \\u escapes go the strict way (its surrogate message)."""
    if b"\\u" in data:
        return None
    try:
        obj = msgspec.json.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    keys, stack = 0, [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            keys += len(v)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return obj if keys == data.count(b":") else None


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError("duplicate key %r" % key)
        obj[key] = value
    return obj


def _reject_constant(name: str) -> NoReturn:
    raise ValueError("%s is not valid JSON" % name)


def _bounded_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > sys.get_int_max_str_digits() > 0:
        raise ValueError("a number of %d digits is out of range (at most %d)" % (digits, sys.get_int_max_str_digits()))
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("number %s is out of range" % text[:32])
    return value


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def parse_json(data: bytes) -> dict[str, Any]:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    fast = _parse_plain(data)
    if fast is not None:
        return _within_nesting(fast, data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise malformed("body is not valid UTF-8 (byte %d)" % exc.start) from None
    if not text.strip():
        raise malformed("body is empty; send a JSON object")
    if text.startswith("\ufeff"):
        raise malformed("body starts with a second byte order mark")
    try:
        obj = json.loads(
            text,
            object_pairs_hook=_pairs,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except RecursionError:
        raise malformed(too_deep_detail()) from None
    except ValueError as exc:
        raise malformed("body is not valid JSON: %s" % exc) from None
    if not isinstance(obj, dict):
        raise malformed("body must be a JSON object, got %s" % json_kind(obj))
    # Raw UTF-8 cannot carry a surrogate (decode above rejects it): only a \u escape can.
    if b"\\u" in data and _has_lone_surrogate(obj):
        raise malformed("body holds a lone UTF-16 surrogate escape, which is not text")
    return _within_nesting(obj, data)


def _within_nesting(obj: dict[str, Any], data: bytes) -> dict[str, Any]:
    """The body, unless it nests deeper than every model can render (models/nesting.py)."""
    if nests_deeper(obj, raw=data):
        raise malformed(too_deep_detail())
    return obj


def decode(raw: bytes, encoding: str, settings: Settings) -> tuple[dict[str, Any], int]:
    """The body's JSON object and its size in bytes once decompressed, within the limits."""
    data = decompress(raw, encoding, settings.max_decompressed_bytes)
    check_values(data, settings.max_body_values)
    return parse_json(data), len(data)


async def read_json(
    headers: Mapping[str, str], read: Callable[[], Awaitable[bytes]], settings: Settings
) -> tuple[dict[str, Any], int]:
    """`headers`: lower-case names → values (routes.systemone.headers_of); `read()`: the raw
    body (read_raw or read_rsgi), awaited once the headers have passed. Returns the body's JSON
    object and its size once decompressed; one past `OFFLOAD_BYTES` is decoded off the loop."""
    encoding = check_headers(headers, settings)
    raw = await read()
    if len(raw) <= OFFLOAD_BYTES:
        data = inflate(raw, encoding, min(OFFLOAD_BYTES, settings.max_decompressed_bytes))
        if data is not None:
            check_values(data, settings.max_body_values)
            return parse_json(data), len(data)
    return await asyncio.to_thread(decode, raw, encoding, settings)
