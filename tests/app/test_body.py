"""Body decoding units: strict JSON, compression limits."""

from __future__ import annotations

import asyncio
import gzip

import pytest
import zstandard

from app.body import check_values, count_values, decompress, parse_json, read_json, read_raw
from app.config import Settings
from app.problems import Problem


def test_bom_and_key_order_are_kept():
    assert list(parse_json(b'\xef\xbb\xbf{"b": 1, "a": {"z": 1, "y": 2}}')) == ["b", "a"]


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": Infinity}',
        b'{"a": -Infinity}',
        b'{"a": 1e400}',
        b'{"a": {"b": 1, "b": 2}}',
        b'{"a": "\\udc00"}',
        b'{"a": 1' + b"0" * 5000 + b"}",
    ],
)
def test_strict_json(data):
    with pytest.raises(Problem) as info:
        parse_json(data)
    assert info.value.status == 400 and info.value.code == "malformed_request"


def test_surrogate_escapes():
    """Lone surrogates are refused wherever they sit (keys too); pairs and escaped backslashes pass."""
    for data in (b'{"s": "\\ud800"}', b'{"\\udfff": 1}', b'{"a": ["x", {"b": "\\uD83D"}]}'):
        with pytest.raises(Problem):
            parse_json(data)
    assert parse_json(b'{"s": "\\ud83d\\ude00"}') == {"s": "\U0001f600"}
    assert parse_json(b'{"s": "\\\\ud800"}') == {"s": "\\ud800"}  # a backslash, then text
    assert parse_json('{"s": "\u00e9\U0001f600"}'.encode()) == {"s": "\u00e9\U0001f600"}  # raw UTF-8


def test_fast_and_strict_paths_agree():
    """parse_json decodes most bodies with msgspec and falls back to the strict json path; both
    must give the same object, and a duplicate key must be refused whichever path sees it, also
    when ':' inside strings breaks the fast path's key count."""
    import json
    import random

    rnd = random.Random(5)

    def value(depth):
        r = rnd.random()
        if depth > 3 or r < 0.3:
            return rnd.choice([1, -2.5, 1e300, True, None, "plain", "with: colon", "é ü", "", 12345678901234567890])
        if r < 0.6:
            return [value(depth + 1) for _ in range(rnd.randint(0, 4))]
        return {
            rnd.choice(["a", "b", "c:d", "é", "q%d" % rnd.randint(0, 9)]) + str(i): value(depth + 1)
            for i in range(rnd.randint(0, 4))
        }

    for _ in range(300):
        obj = {"state": value(0), "questions": value(0)}
        text = json.dumps(obj, ensure_ascii=rnd.random() < 0.3)
        assert parse_json(text.encode()) == json.loads(text)
        if text.count('"state": ') == 1:  # the same key twice, in the top object
            dup = text[:-1] + ', "state": 1}'
            with pytest.raises(Problem):
                parse_json(dup.encode())


def _values(obj) -> int:
    """What count_values counts, from the decoded object: each array and object, and the commas
    between their items."""
    if isinstance(obj, list):
        return 1 + max(0, len(obj) - 1) + sum(_values(v) for v in obj)
    if isinstance(obj, dict):
        return 1 + max(0, len(obj) - 1) + sum(_values(v) for v in obj.values())
    return 0


def test_count_values_skips_strings_and_escapes():
    """Commas and brackets inside strings (escaped quotes and backslashes too) are not values,
    whichever chunk boundary they straddle."""
    import json
    import random

    rnd = random.Random(3)
    texts = ["a,b", "[{", '"', "\\", 'x\\"', "\\\\,", "", "é,["]

    def value(depth):
        r = rnd.random()
        if depth > 4 or r < 0.3:
            return rnd.choice(texts + [1, None, 2.5])
        if r < 0.6:
            return [value(depth + 1) for _ in range(rnd.randint(0, 4))]
        return {rnd.choice(texts) + str(i): value(depth + 1) for i in range(rnd.randint(0, 4))}

    for _ in range(500):
        obj = value(0)
        data = json.dumps(obj, ensure_ascii=rnd.random() < 0.5).encode()
        for chunk in (1, 3, 7, 1 << 20):
            assert count_values(data, chunk) == _values(obj), (data, chunk)


def test_a_body_of_too_many_values_is_refused_before_decoding():
    many = b'{"state": [' + b"[]," * 5000 + b"[]]}"
    with pytest.raises(Problem) as info:
        check_values(many, 4096)
    assert info.value.status == 413 and info.value.code == "too_large" and "4096" in info.value.detail
    check_values(many, 20000)
    # The same bytes inside a string are one value.
    check_values(b'{"state": "' + b"[]," * 5000 + b'"}', 4096)


def test_read_json_decodes_large_and_compressed_bodies_off_the_loop(monkeypatch):
    """A body past 64 KiB once decompressed is decoded on a worker thread; the caller learns its
    decompressed size (which decides where it is prepared)."""
    settings = Settings(max_body_values=1000)
    small = b'{"state": "x"}'
    big = b'{"state": "' + b"y" * 100_000 + b'"}'
    threads = []
    real = asyncio.to_thread

    async def spy(fn, *args):
        threads.append(fn.__name__)
        return await real(fn, *args)

    async def go(data, encoding="identity"):
        headers = {"content-type": "application/json", "content-length": str(len(data)), "content-encoding": encoding}

        async def read():
            return data

        return await read_json(headers, read, settings)

    monkeypatch.setattr(asyncio, "to_thread", spy)
    assert asyncio.run(go(small)) == ({"state": "x"}, len(small))
    assert threads == []
    assert asyncio.run(go(gzip.compress(big), "gzip")) == ({"state": "y" * 100_000}, len(big))
    assert threads == ["decode"]
    bomb = zstandard.ZstdCompressor().compress(b'{"state": [' + b"[]," * 40_000 + b"[]]}")
    with pytest.raises(Problem) as info:
        asyncio.run(go(bomb, "zstd"))
    assert info.value.status == 413 and threads == ["decode", "decode"]


def test_decompression_limits():
    payload = b'{"state": "' + b"x" * 50000 + b'"}'
    assert decompress(gzip.compress(payload), "gzip", 60000) == payload
    assert decompress(zstandard.ZstdCompressor().compress(payload), "zstd", 60000) == payload
    for data, enc in ((gzip.compress(payload), "gzip"), (zstandard.ZstdCompressor().compress(payload), "zstd")):
        with pytest.raises(Problem) as info:
            decompress(data, enc, 1000)
        assert info.value.status == 413
    with pytest.raises(Problem) as info:
        decompress(b"\x28\xb5\x2f\xfd garbage", "zstd", 1000)
    assert info.value.status == 400


def _read(messages, stall=False, **settings):
    messages = list(messages)

    async def receive():  # an ASGI receive channel that plays `messages`
        if not messages and stall:
            await asyncio.sleep(3600)
        return messages.pop(0)

    return asyncio.run(read_raw(receive, Settings(**settings)))


def test_read_raw_joins_chunks_and_enforces_the_limits():
    assert (
        _read(
            [
                {"type": "http.request", "body": b'{"a":', "more_body": True},
                {"type": "http.request", "body": b"", "more_body": True},
                {"type": "http.request", "body": b" 1}", "more_body": False},
            ]
        )
        == b'{"a": 1}'
    )
    with pytest.raises(Problem) as info:  # a chunked body past the limit, found while reading
        _read(
            [
                {"type": "http.request", "body": b"x" * 600, "more_body": True},
                {"type": "http.request", "body": b"x" * 600, "more_body": False},
            ],
            max_body_bytes=1000,
        )
    assert info.value.status == 413 and info.value.headers == {"Connection": "close"}
    with pytest.raises(Problem) as info:  # the client left half way
        _read([{"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}])
    assert info.value.status == 499 and info.value.code == "client_disconnected"
    with pytest.raises(Problem) as info:  # the rest never comes
        _read([{"type": "http.request", "body": b"{", "more_body": True}], stall=True, body_timeout_s=0.05)
    assert info.value.status == 408 and info.value.code == "request_timeout"


def test_the_body_timer_cancels_only_its_own_wait():
    """The 408 leaves the request's task uncancelled (a later timeout in it still works), a
    cancellation from elsewhere (shutdown, a lost client) stays a cancellation, and a body that
    arrives leaves no timer behind."""

    async def stall():
        await asyncio.sleep(3600)

    async def timed_out_then_more():
        with pytest.raises(Problem) as info:
            await read_raw(lambda: stall(), Settings(body_timeout_s=0.02))
        assert info.value.status == 408
        assert asyncio.current_task().cancelling() == 0
        with pytest.raises(TimeoutError):  # asyncio.timeout still reads its own expiry
            async with asyncio.timeout(0.01):
                await asyncio.sleep(1)

    asyncio.run(timed_out_then_more())

    async def cancelled_from_outside():
        task = asyncio.ensure_future(read_raw(lambda: stall(), Settings(body_timeout_s=30)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled_from_outside())

    async def arrives():
        loop = asyncio.get_running_loop()
        before = len(loop._scheduled)

        async def receive():
            return {"type": "http.request", "body": b"{}", "more_body": False}

        assert await read_raw(receive, Settings(body_timeout_s=30)) == b"{}"
        assert not [h for h in loop._scheduled[before:] if not h.cancelled()]

    asyncio.run(arrives())


def test_a_kept_body_timer_holds_no_task():
    """rloop keeps a cancelled timer's callback alive: once the body is read, the callback must
    not hold the request's task, nor cancel it if called."""
    import gc
    import weakref

    kept = []

    async def main():
        loop = asyncio.get_running_loop()
        call_later = loop.call_later

        def keeping(delay, callback, *args):
            kept.append(callback)
            return call_later(delay, callback, *args)

        loop.call_later = keeping

        async def receive():
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def request():
            assert await read_raw(receive, Settings(body_timeout_s=30)) == b"{}"
            kept[0]()  # fired late: nothing to cancel any more
            await asyncio.sleep(0)  # would raise CancelledError had it cancelled us
            return "answered"

        task = asyncio.ensure_future(request())
        assert await task == "answered"
        alive = weakref.ref(task)
        del task
        gc.collect()
        return alive

    assert asyncio.run(main())() is None and len(kept) == 1
