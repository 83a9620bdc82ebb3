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
