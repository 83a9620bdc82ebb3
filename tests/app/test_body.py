"""Body decoding units: strict JSON, compression limits."""
from __future__ import annotations

import gzip

import pytest
import zstandard

from app.body import decompress, parse_json
from app.problems import Problem


def test_bom_and_key_order_are_kept():
    assert list(parse_json(b'\xef\xbb\xbf{"b": 1, "a": {"z": 1, "y": 2}}')) == ["b", "a"]


@pytest.mark.parametrize("data", [b'{"a": Infinity}', b'{"a": -Infinity}', b'{"a": 1e400}',
                                  b'{"a": {"b": 1, "b": 2}}', b'{"a": "\\udc00"}', b'{"a": 1' + b"0" * 5000 + b"}"])
def test_strict_json(data):
    with pytest.raises(Problem) as info:
        parse_json(data)
    assert info.value.status == 400 and info.value.code == "malformed_request"


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
