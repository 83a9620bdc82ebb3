"""What the served Qwen3.5-backbone families share: the tokenizer and pad id of the export, and
no CUDA graphs."""
from __future__ import annotations

from typing import Any, Mapping

from models.base import ExportedModel
from models.tokenizer import TokenizerHandle


class QwenServed(ExportedModel):
    # Measured on the H200: capturing a graph per new (rows, length) bucket cost more than replay
    # saved once lengths vary (Open-Jev noul mix, c=1 p95 640 ms in the first pass).
    cuda_graphs = False

    def __init__(self, directory: str, manifest: Mapping[str, Any], description: str):
        super().__init__(directory, manifest, description)
        self.tok = TokenizerHandle.load(directory)
        pad = self.tok.tokenizer.token_to_id("<|endoftext|>")
        self.pad_id = pad if pad is not None else 0
