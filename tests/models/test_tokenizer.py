"""The shared tokenizer handle: the cross-request cache of short texts is exact and bounded."""
from __future__ import annotations

from models import tokenizer
from models.tokenizer import TokenizerHandle


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
    assert len(tok._shared) <= 6           # cleared when full, as encode_shared
