"""What the served Qwen3.5-backbone families share: the tokenizer and pad id of the export, and
CUDA graphs only for small shapes that recur."""

from __future__ import annotations

import dataclasses
from typing import Any
from collections.abc import Mapping

from models.base import ExportedModel, GraphPolicy, MicroBatches
from models.qwen35.prefix import check_head
from models.qwen35.revision import GRAPH_REVISION, GRAPH_REVISION_NOTE
from models.tokenizer import TokenizerHandle


class QwenServed(ExportedModel):
    # Every request can be a new length and a capture costs a few passes, so a (rows, length)
    # bucket is due for capture on its second sighting: a one-off length never pays for one. Past about
    # 1,024 tokens a pass is compute-bound and replay saves nothing.
    cuda_graphs = GraphPolicy(capture_after=2, max_tokens=1024)
    # For the families whose rows end at their last token (rows.LastTokenAdapter: Cua-S1's
    # questions, Open-Jev's candidates): a one-row pass of a few hundred tokens is bound by its
    # kernel launches, so replay saves much of it, and the one-row length buckets are captured as
    # the model loads (shortest first, within the runtime's few seconds for it) rather than left
    # for the first requests to meet uncaptured. Passes of several rows are left to idle time.
    one_row_graphs = dataclasses.replace(cuda_graphs, precapture=True)
    micro_batches = MicroBatches()

    def __init__(self, directory: str, manifest: Mapping[str, Any], description: str):
        super().__init__(directory, manifest, description)
        self.tok = TokenizerHandle.load(directory)
        pad = self.tok.tokenizer.token_to_id("<|endoftext|>")
        self.pad_id = pad if pad is not None else 0

    # What a family's graph runs its prompt head in ("row", "record") where its exporter bakes the
    # head in (prefix.py): an export without a baked head still serves, and is named at load.
    prompt_head_unit: str | None = None

    def notes(self) -> list[str]:
        out = super().notes()
        options = self.manifest.get("export_options", {})
        revision = options.get("graph_revision", 1)
        if revision < GRAPH_REVISION:
            out.append(
                "its graph is revision %d of the Qwen3.5 exporter's, which writes %d (%s); running its "
                "export command again writes it" % (revision, GRAPH_REVISION, GRAPH_REVISION_NOTE)
            )
        if self.prompt_head_unit and not self.manifest.get("prefix"):
            out.append(
                "its graph runs the system turn in every %s, which the exporter bakes into the graph "
                "(shorter passes); running its export command again writes that" % self.prompt_head_unit
            )
        return out

    def describe(self) -> dict:
        """GET /v1/models' entry, naming the prompt head the graph has baked in (its token count)."""
        out = super().describe()
        tokens = (self.manifest.get("prefix") or {}).get("tokens")
        if tokens:
            out["baked_prompt_tokens"] = tokens
        return out

    def baked_head(self, head_ids: list[int]) -> list[int]:
        """The prompt head the graph has baked in (prefix.py), which every row must start with;
        refused at load, not per request, when this server's prompt and tokenizer give `head_ids`."""
        baked = list((self.manifest.get("prefix") or {}).get("ids") or [])
        if baked:
            check_head(self.manifest, head_ids, self.name)
        return baked
