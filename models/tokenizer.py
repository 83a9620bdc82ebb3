"""A `tokenizers` tokenizer plus the special tokens its `tokenizer_config.json` names.

transformers is not in the runtime image, so the special tokens that `AutoTokenizer` would
resolve (cls / sep / pad / mask, ...) are read from the Hugging Face files directly. Encoding
never mutates the tokenizer (no truncation or padding state), so one instance is shared by
every request thread.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

# Question texts and options repeat across requests (states do not): their encodings are kept,
# up to this many, for texts up to this long (a bound on what a client can make us hold).
SHARED_TEXTS = 8192
SHARED_TEXT_CHARS = 256


def _content(value) -> str | None:
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


@dataclass
class TokenizerHandle:
    tokenizer: object
    special: dict[str, str]          # role ("cls_token") -> token string
    ids: dict[str, int]              # role -> id
    _shared: dict = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, directory: str, roles: tuple[str, ...] = ()) -> "TokenizerHandle":
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
        special: dict[str, str] = {}
        for name in ("special_tokens_map.json", "tokenizer_config.json"):
            path = os.path.join(directory, name)
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
                for key, value in data.items():
                    if key.endswith("_token") and _content(value) is not None:
                        special.setdefault(key, _content(value))
        ids = {}
        for role, text in special.items():
            token_id = tok.token_to_id(text)
            if token_id is not None:
                ids[role] = token_id
        missing = [r for r in roles if r not in ids]
        if missing:
            raise ValueError("tokenizer in %s names no usable %s" % (directory, ", ".join(missing)))
        return cls(tok, special, ids)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_shared(self, text: str) -> tuple[int, ...]:
        """`encode` for short texts that recur across requests, from a bounded cache (cleared
        when full; safe across threads: single dict operations under the GIL)."""
        ids = self._shared.get(text)
        if ids is None:
            ids = tuple(self.encode(text))
            if len(text) <= SHARED_TEXT_CHARS:
                if len(self._shared) >= SHARED_TEXTS:
                    self._shared.clear()
                self._shared[text] = ids
        return ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]
