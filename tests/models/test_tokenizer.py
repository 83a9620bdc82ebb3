"""The shared tokenizer handle: the cross-request cache of short texts is exact and bounded; the
tokenizer's thread pool is the size the server sets."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from models import tokenizer
from models.tokenizer import TokenizerHandle

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_encode_shared_is_encode_and_stays_bounded(english, monkeypatch):
    tok = TokenizerHandle.load(english[1])
    monkeypatch.setattr(tokenizer, "SHARED_TEXTS", 4)
    texts = ["noul question: Refund?", " billing: Charges", "choice question: Which team?", " a", " b", " c"]
    for text in texts + texts:
        assert list(tok.encode_shared(text)) == tok.encode(text)
        assert len(tok._shared) <= 4
    long = "x " * tokenizer.SHARED_TEXT_CHARS
    assert list(tok.encode_shared(long)) == tok.encode(long) and long not in tok._shared


def test_encode_shared_many_is_encode_in_one_call(english, monkeypatch):
    """Each text's own ids (never those of the texts joined), the uncached ones from one batch
    call, repeats once, long texts not kept, and the cache bounded."""
    tok = TokenizerHandle.load(english[1])
    monkeypatch.setattr(tokenizer, "SHARED_TEXTS", 6)
    batches = []
    encode_batch = tok.encode_batch
    monkeypatch.setattr(tok, "encode_batch", lambda texts: batches.append(list(texts)) or encode_batch(texts))
    long = "y " * tokenizer.SHARED_TEXT_CHARS
    texts = ["\nALLOWED OPTIONS:\n", "OPTION 1: ", "\n", "OPTION 1: ", long, "END FIELD\n"]
    got = tok.encode_shared_many(texts)
    assert batches == [["\nALLOWED OPTIONS:\n", "OPTION 1: ", "\n", long, "END FIELD\n"]]
    assert all(list(got[t]) == tok.encode(t) for t in texts)
    assert long not in tok._shared and "OPTION 1: " in tok._shared
    again = tok.encode_shared_many(["OPTION 1: ", "\n", "OPTION 2: "])
    assert batches[1:] == [["OPTION 2: "]] and list(again["OPTION 2: "]) == tok.encode("OPTION 2: ")
    many = ["z%d" % i for i in range(10)]
    assert [list(v) for v in tok.encode_shared_many(many).values()] == [tok.encode(t) for t in many]
    assert len(tok._shared) <= 6  # cleared when full, as encode_shared


def test_limit_pool_sizes_the_pool_unless_the_environment_names_a_size(monkeypatch):
    monkeypatch.setattr(tokenizer, "usable_cores", lambda: 16)
    env = {}
    assert tokenizer.limit_pool(4, env) == "4" and env == {"RAYON_NUM_THREADS": "4"}
    assert tokenizer.limit_pool(2, env) == "4"  # set once: the first value holds
    assert tokenizer.limit_pool(4, {"RAYON_NUM_THREADS": "8"}) == "8"  # the operator's own
    assert tokenizer.limit_pool(0, {}) is None  # rayon's default, one per core
    monkeypatch.setattr(tokenizer, "usable_cores", lambda: 2)
    assert tokenizer.limit_pool(4, {}) == "2"  # never more than one per core


@pytest.mark.parametrize("threads, operator", [(1, None), (2, None), (4, "1")])
def test_the_tokenizer_pool_is_the_size_limit_pool_sets(english, threads, operator):
    """In a fresh process (the pool is built once, on the first batch call), the threads a
    batch call starts are the size limit_pool put in force."""
    code = (
        "import os, sys\n"
        "from models.tokenizer import TokenizerHandle, limit_pool\n"
        "size = limit_pool(int(sys.argv[2]))\n"
        "tok = TokenizerHandle.load(sys.argv[1])\n"
        "before = len(os.listdir('/proc/self/task'))\n"
        "tok.encode_batch(['ticket %d: I was charged twice' % i for i in range(64)])\n"
        "print(size, len(os.listdir('/proc/self/task')) - before)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RAYON_NUM_THREADS", "TOKENIZERS_PARALLELISM")}
    if operator is not None:
        env["RAYON_NUM_THREADS"] = operator
    out = subprocess.run(
        [sys.executable, "-c", code, english[1], str(threads)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    assert out[0] == (operator or str(min(threads, tokenizer.usable_cores())))
    assert int(out[1]) == int(out[0])
