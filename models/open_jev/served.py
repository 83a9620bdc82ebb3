"""An Open-Jev export, served: one row per candidate through the backbone graph, the scalar head
on the host in float64, calibration per question. A graph that takes a prompt head per pass
(graph.SharedHead) runs a request's shared chat turn and state once and each candidate's rest
after it (rows.SharedHeadAdapter); an older export runs every candidate whole, batched with other
requests' candidates."""

from __future__ import annotations

from typing import Any
from collections.abc import Mapping

from models.base import Prepared
from models.errors import InferenceFailed
from models.open_jev import checkpoint as ck
from models.open_jev import finish as finishing
from models.open_jev.prepare import LIMITS, OpenJevLimits, prepare
from models import gdn_plan
from models.qwen35 import prefix
from models.qwen35.rows import LastTokenAdapter, SharedHeadAdapter
from models.qwen35.served import QwenServed

WARMUP_REQUEST = {
    "state": {"ticket": "I was charged twice for my order. Please refund the duplicate today.", "tier": "gold"},
    "questions": {
        "route": {
            "type": "choice",
            "instructions": "Which team should handle this?",
            "criteria": {"billing": "Charges and refunds", "security": None, "technical": "Software problems"},
        },
        "refund_review": {
            "type": "noul",
            "instructions": "Does the customer ask for a refund?",
            "criteria": {"true": "The customer asks for money back", "false": "No refund is requested"},
        },
        "urgency": {
            "type": "score",
            "instructions": "How urgent is the request?",
            "criteria": ["Not urgent", "Needs attention soon", "Needs attention immediately"],
        },
    },
}


class OpenJevModel(QwenServed):
    family = "open_jev"
    warmup_request = WARMUP_REQUEST
    cuda_graphs = QwenServed.one_row_graphs  # a noul question is one row

    def __init__(self, directory: str, manifest: Mapping[str, Any], limits: OpenJevLimits | None = None):
        super().__init__(directory, manifest, "Open-Jev")
        self.export = ck.read_export_metadata(directory)
        hidden = manifest.get("dims", {}).get("hidden_size")
        if hidden is not None and len(self.export.head_weight) != hidden:
            raise ValueError(
                "%s: head width %d does not match the backbone's hidden size %d"
                % (directory, len(self.export.head_weight), hidden)
            )
        self.limits_ = limits or LIMITS
        # The export's own names (its `--name` and aliases) pass besides upstream's.
        self.names = (self.name, *self.aliases)
        self.adapter: LastTokenAdapter
        if gdn_plan.shared_head(manifest):
            # Candidates share their request's chat turn and state: the graph takes them once a
            # pass. A pass's shape then holds its head's length, so none is captured.
            self.adapter = SharedHeadAdapter(self.pad_id, self.family, self.fixed_head())
            self.cuda_graphs = None
        else:
            self.adapter = LastTokenAdapter(self.pad_id, key=self.family)

    def fixed_head(self) -> list[int]:
        """The tokens every candidate row starts with: the chat turn up to the state, as this
        export's tokenizer and prompt encode it (the rows of states that start unlike each other
        share no more)."""
        rows = []
        for state in ("a", "1", "{", "日本", "\n", " ", "é", "<"):
            body = {"model": self.name, "state": state, "questions": {"q": {"type": "noul", "instructions": "q"}}}
            rows += prepare(body, self.tok, self.export, self.limits_, names=self.names)[0]
        ids = [r.ids for r in rows]
        return [int(t) for t in ids[0][: prefix.common(ids)]]

    def prepare(self, body: Mapping[str, Any], profile: str = "reference") -> Prepared:
        rows, context, usage = prepare(body, self.tok, self.export, self.limits_, names=self.names, profile=profile)
        work = [r.ids for r in rows]
        return Prepared(
            rows=len(work),
            tokens=usage["input_tokens"],
            longest=max(len(r) for r in work),
            work=work,
            context=context,
            questions=len(context.questions),
        )

    def finish(
        self, prepared: Prepared, output: Any, profile: str, model_name: str, requested: str | None = None
    ) -> dict:
        (hidden,) = output
        if hidden.shape[0] != prepared.rows:
            raise InferenceFailed("expected %d hidden rows, got %d" % (prepared.rows, hidden.shape[0]))
        return finishing.finish(prepared.context, hidden, profile=profile)

    def limits(self) -> dict:
        lim = self.limits_
        return {
            "max_questions": lim.max_questions,
            "max_candidates": lim.max_candidates,
            "max_choice_options": lim.max_choice_options,
            "max_score_levels": lim.max_score_levels,
            "max_length": self.export.max_length,
            "question_types": ["choice", "score", "noul"],
            "truncates_state": False,
        }

    def describe_extra(self) -> dict:
        return {"base": self.export.model_id, "temperature": self.export.temperature}


def load(directory: str, manifest: Mapping[str, Any]) -> OpenJevModel:
    return OpenJevModel(directory, manifest)
