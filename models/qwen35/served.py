"""What the served Qwen3.5-backbone families share: the tokenizer and pad id of the export, and
CUDA graphs only for small shapes that recur."""
from __future__ import annotations

from typing import Any, Mapping

from models.base import ExportedModel, GraphPolicy
from models.qwen35.revision import GRAPH_REVISION, GRAPH_REVISION_NOTE
from models.tokenizer import TokenizerHandle


class QwenServed(ExportedModel):
    # Every request can be a new length, and a capture costs 35-144 ms (H200), so a (rows,
    # length) bucket is captured on its second sighting: a one-off length never pays for one.
    # Replay saved 1.6-2.9 ms at c=1 and 3-5 ms at c=4 over HTTP (Cua-S1 4B, 139-292 tokens) but
    # ~1 ms of 24 at four 218-token rows in-process: past ~1,024 tokens a pass is compute-bound.
    cuda_graphs = GraphPolicy(capture_after=2, max_tokens=1024)

    def __init__(self, directory: str, manifest: Mapping[str, Any], description: str):
        super().__init__(directory, manifest, description)
        self.tok = TokenizerHandle.load(directory)
        pad = self.tok.tokenizer.token_to_id("<|endoftext|>")
        self.pad_id = pad if pad is not None else 0

    def notes(self) -> list[str]:
        out = super().notes()
        revision = self.manifest.get("export_options", {}).get("graph_revision", 1)
        if revision < GRAPH_REVISION:
            out.append("its graph is revision %d of the Qwen3.5 exporter's, which now writes %d (%s); running its "
                       "export command again writes it" % (revision, GRAPH_REVISION, GRAPH_REVISION_NOTE))
        return out
