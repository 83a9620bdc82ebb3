"""A Cua-S1 export, served: one row per question through the backbone graph, letter logits on
the host from the saved letter rows (float64 accumulation, as the native worker), then finish."""
from __future__ import annotations

import os
from typing import Any, Mapping

import numpy as np

from models.base import Prepared
from models.cua_s1 import finish as finishing
from models.cua_s1.checkpoint import IDENTITY, MODEL_NAME
from models.cua_s1.export import LETTER_ROWS
from models.cua_s1.prepare import CuaLimits, prepare
from models.errors import InferenceFailed
from models.qwen35.rows import LastTokenAdapter
from models.tokenizer import TokenizerHandle

# The models.md §3.3 example request.
WARMUP_REQUEST = {
    "state": "Dialog: Delete 3 files permanently? Buttons: Delete, Cancel",
    "questions": {"pick": {"type": "choice", "instructions": "Keep the files.",
                           "criteria": {"delete": "Click Delete", "cancel": "Click Cancel"}}},
}


class CuaS1Model:
    family = "cua_s1"
    # Measured on the H200: capturing a graph per new (rows, length) bucket cost more than replay
    # saved once lengths vary (Open-Jev noul mix, c=1 p95 640 ms in the first pass).
    cuda_graphs = False

    def __init__(self, directory: str, manifest: Mapping[str, Any], limits: CuaLimits | None = None):
        self.directory, self.manifest = directory, manifest
        self.name = manifest["name"]
        self.aliases = tuple(manifest.get("aliases", ()))
        self.description = manifest.get("description", "Cua-S1")
        self.onnx_path = os.path.join(directory, manifest["onnx"])
        self.tok = TokenizerHandle.load(directory)
        self.letter_rows = np.load(os.path.join(directory, LETTER_ROWS)).astype(np.float32)
        self.limits_ = limits or CuaLimits()
        pad = self.tok.tokenizer.token_to_id("<|endoftext|>")
        self.adapter = LastTokenAdapter(pad if pad is not None else 0, key=self.family)
        # The registry has routed the request here; its served name and upstream's name both pass.
        self.names = tuple(dict.fromkeys((self.name, MODEL_NAME)))

    def prepare(self, body: Mapping[str, Any]) -> Prepared:
        return prepare(body, self.tok, self.limits_, names=self.names)

    def finish(self, prepared: Prepared, output: Any, profile: str, model_name: str,
               requested: str | None = None) -> dict:
        (hidden,) = output
        if hidden.shape[0] != prepared.questions:
            raise InferenceFailed("expected %d hidden rows, got %d" % (prepared.questions, hidden.shape[0]))
        return finishing.finish_hidden(prepared.context, hidden, self.letter_rows, profile, model_name)

    def warmup_body(self) -> dict:
        return {"model": self.name, **WARMUP_REQUEST}

    def limits(self) -> dict:
        lim = self.limits_
        return {"max_questions": lim.max_questions, "max_choice_options": lim.max_options,
                "max_prompt_tokens": lim.max_prompt_tokens, "question_types": ["choice"],
                "truncates_state": False}

    def describe(self) -> dict:
        src = self.manifest.get("source", {})
        return {"name": self.name, "description": self.description, "aliases": list(self.aliases),
                "release_date": str(self.manifest.get("exported_at", "1970-01-01"))[:10],
                "family": self.family, "identity": IDENTITY, "checkpoint": src.get("checkpoint"),
                "revision": src.get("revision"), "random_weights": bool(self.manifest.get("random_weights")),
                "limits": self.limits()}


def load(directory: str, manifest: Mapping[str, Any]) -> CuaS1Model:
    return CuaS1Model(directory, manifest)
