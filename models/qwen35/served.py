"""What the served Qwen3.5-backbone families share: the tokenizer and pad id of the export, and
CUDA graphs only for small shapes that recur."""
from __future__ import annotations

from typing import Any, Mapping

from models.base import ExportedModel, GraphPolicy
from models.tokenizer import TokenizerHandle


class QwenServed(ExportedModel):
    # Every request can be a new length. Capturing each new (rows, length) bucket at first sight
    # cost more than replay saved (H200, Open-Jev noul mix: c=1 p95 640 ms in the first pass), so
    # a shape is captured on its second sighting. Replay saved ~2.3 ms of 12 at one 218-token
    # row and ~1.4 of 77 at sixteen (Cua-S1 4B, in-process): past ~1,024 tokens a pass is
    # compute-bound and a graph would only pin memory.
    cuda_graphs = GraphPolicy(capture_after=2, max_tokens=1024)

    def __init__(self, directory: str, manifest: Mapping[str, Any], description: str):
        super().__init__(directory, manifest, description)
        self.tok = TokenizerHandle.load(directory)
        pad = self.tok.tokenizer.token_to_id("<|endoftext|>")
        self.pad_id = pad if pad is not None else 0
