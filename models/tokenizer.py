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


def limit_pool(threads: int, env=None) -> str | None:
    """Size the `tokenizers` library's thread pool (rayon's global pool, built on its first
    batch call, from RAYON_NUM_THREADS): at most `threads` and one per core this process may
    use, unless the environment already names a size; 0 leaves rayon's default. Returns the
    size in force (None: rayon's default). Call it before the process's first batch call."""
    env = os.environ if env is None else env
    if "RAYON_NUM_THREADS" not in env and threads > 0:
        env["RAYON_NUM_THREADS"] = str(min(threads, usable_cores()))
    return env.get("RAYON_NUM_THREADS")


def usable_cores() -> int:
    """The cores this process may run on (a container's cpuset, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _content(value) -> str | None:
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


@dataclass
class TokenizerHandle:
    tokenizer: object
    special: dict[str, str]  # role ("cls_token") -> token string
    ids: dict[str, int]  # role -> id
    _shared: dict = field(default_factory=dict, repr=False)
    _frames: dict = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, directory: str, roles: tuple[str, ...] = ()) -> TokenizerHandle:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
        # A tokenizer.json may carry padding or truncation; one text encoded alone or in a batch
        # must give the same ids, so neither applies here.
        tok.no_padding()
        tok.no_truncation()
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
        # encode_batch_fast: the same ids without computing character offsets, and it lets go of
        # the GIL while it works (`encode` holds it), so the executor thread runs meanwhile.
        return self.tokenizer.encode_batch_fast([text], add_special_tokens=False)[0].ids

    def encode_shared(self, text: str) -> tuple[int, ...]:
        """`encode` for short texts that recur across requests, from a bounded cache (cleared
        when full; safe across threads: single dict operations under the GIL)."""
        ids = self._shared.get(text)
        if ids is None:
            ids = self._keep(text, self.encode(text))
        return ids

    def encode_shared_many(self, texts: list[str]) -> dict[str, tuple[int, ...]]:
        """`encode_shared` for many texts, the ones not cached encoded in one batch call (each
        call into the tokenizer has a fixed cost): text -> ids."""
        out = {text: self._shared.get(text) for text in texts}
        todo = [text for text, ids in out.items() if ids is None]
        if todo:
            for text, ids in zip(todo, self.encode_batch(todo), strict=True):
                out[text] = self._keep(text, ids)
        return out

    def _keep(self, text: str, ids: list[int]) -> tuple[int, ...]:
        """`ids` as kept in the shared cache (cleared when full; long texts are not kept)."""
        ids = tuple(ids)
        if len(text) <= SHARED_TEXT_CHARS:
            if len(self._shared) >= SHARED_TEXTS:
                self._shared.clear()
            self._shared[text] = ids
        return ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch_fast(texts, add_special_tokens=False)]

    def encode_framed(self, head: str, bodies: list[str], tail: str) -> list[list[int]]:
        """`encode_batch([head + b + tail for b in bodies])`, with the fixed head and tail encoded
        once. Exact where the head ends and the tail starts with a special token that strips no
        whitespace and is matched before normalization: the tokenizer cuts the text at those
        before it normalizes, pre-tokenizes or merges, so nothing merges across them. Such a
        frame is still checked against the whole strings the first time it is used; any other
        frame, or one that fails, is encoded whole."""
        if (head, tail) not in self._frames:
            whole = self.encode_batch([head + b + tail for b in bodies])
            parts = None
            if self._cuts_at(head, end=True) and self._cuts_at(tail, end=False):
                parts = (self.encode(head), self.encode(tail))
                framed = [parts[0] + ids + parts[1] for ids in self.encode_batch(bodies)]
                parts = parts if framed == whole else None
            if len(self._frames) >= SHARED_TEXTS:
                self._frames.clear()
            self._frames[(head, tail)] = parts
            return whole
        parts = self._frames[(head, tail)]  # None: this frame is encoded whole
        if parts is None:
            return self.encode_batch([head + b + tail for b in bodies])
        head_ids, tail_ids = parts
        return [head_ids + ids + tail_ids for ids in self.encode_batch(bodies)]

    def _cuts_at(self, text: str, end: bool) -> bool:
        """Whether `text` ends (starts) with an added special token that the tokenizer splits on
        before normalizing and that takes no whitespace from its neighbour on that side."""
        for token in self.tokenizer.get_added_tokens_decoder().values():
            if (
                token.special
                and not token.normalized
                and token.content
                and (
                    (end and text.endswith(token.content) and not token.rstrip)
                    or (not end and text.startswith(token.content) and not token.lstrip)
                )
            ):
                return True
        return False
