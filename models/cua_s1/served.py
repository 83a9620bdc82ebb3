"""A Cua-S1 export, served: one row per question through the backbone graph, letter logits on
the host from the saved letter rows (float64 accumulation, as the native worker), then finish."""

from __future__ import annotations

import os
from typing import Any
from collections.abc import Mapping

import numpy as np

from models.base import Prepared
from models.cua_s1 import finish as finishing
from models.cua_s1.identity import IDENTITY, MODEL_NAME
from models.cua_s1.prepare import CuaLimits, head_ids, prepare
from models.errors import InferenceFailed
from models.qwen35.rows import LastTokenAdapter
from models.qwen35.served import QwenServed

# The letter rows (one per answer letter, float32) export.py saves beside the graph. Defined
# here, on the served side, which never imports the exporter (torch is not in the runtime image).
LETTER_ROWS = "letter_rows.npy"

# The models.md §3.3 example request.
WARMUP_REQUEST = {
    "state": "Dialog: Delete 3 files permanently? Buttons: Delete, Cancel",
    "questions": {
        "pick": {
            "type": "choice",
            "instructions": "Keep the files.",
            "criteria": {"delete": "Click Delete", "cancel": "Click Cancel"},
        }
    },
}


class CuaS1Model(QwenServed):
    family = "cua_s1"
    warmup_request = WARMUP_REQUEST
    prompt_head_unit = "row"
    cuda_graphs = QwenServed.one_row_graphs

    def __init__(self, directory: str, manifest: Mapping[str, Any], limits: CuaLimits | None = None):
        super().__init__(directory, manifest, "Cua-S1")
        self.letter_rows = np.load(os.path.join(directory, LETTER_ROWS)).astype(np.float32)
        self.letter_rows64 = self.letter_rows.astype(np.float64)  # exact: float32 values, widened once
        # A half-precision export tracks the authors' bfloat16 reference, so its logits are rounded
        # to bfloat16 (finish.py, step 2); a float32 export answers as their float32 reference.
        self.bf16_readout = manifest.get("weights_dtype", "float32") != "float32"
        self.limits_ = limits or CuaLimits()
        self.adapter = LastTokenAdapter(self.pad_id, key=self.family, head=self.baked_head(head_ids(self.tok)))
        # The registry has routed the request here; its served name and upstream's name both pass.
        self.names = tuple(dict.fromkeys((self.name, MODEL_NAME)))

    def prepare(self, body: Mapping[str, Any], profile: str = "reference") -> Prepared:
        return prepare(body, self.tok, self.limits_, names=self.names, baked=len(self.adapter.head))

    def finish(
        self, prepared: Prepared, output: Any, profile: str, model_name: str, requested: str | None = None
    ) -> dict:
        (hidden,) = output
        if hidden.shape[0] != prepared.questions:
            raise InferenceFailed("expected %d hidden rows, got %d" % (prepared.questions, hidden.shape[0]))
        return finishing.finish_hidden(
            prepared.context, hidden, self.letter_rows64, profile, model_name, bf16=self.bf16_readout
        )

    def limits(self) -> dict:
        lim = self.limits_
        return {
            "max_questions": lim.max_questions,
            "max_choice_options": lim.max_options,
            "max_prompt_tokens": lim.max_prompt_tokens,
            "question_types": ["choice"],
            "truncates_state": False,
        }

    def describe_extra(self) -> dict:
        return {"identity": IDENTITY}


def load(directory: str, manifest: Mapping[str, Any]) -> CuaS1Model:
    return CuaS1Model(directory, manifest)
