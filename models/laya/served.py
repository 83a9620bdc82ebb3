"""A Laya export, served: preparation, the batch adapter and finishing around one ONNX graph."""

from __future__ import annotations

from typing import Any
from collections.abc import Mapping, Sequence

from models.base import API_EXAMPLE, ExportedModel, GraphPolicy, Prepared, each
from models.errors import InferenceFailed
from models.laya import finish as finishing
from models.laya.adapter import INPUTS, LayaAdapter
from models.laya.prepare import LayaLimits, RowBuilder, build_rows, parse_request, prepare_rows
from models.tokenizer import TokenizerHandle

# The api.md example: the warm-up request, and what tests send.
WARMUP_REQUEST = API_EXAMPLE


class LayaModel(ExportedModel):
    family = "laya"
    # Batches up to the row bound (OMNI_CUDA_GRAPH_ROWS) and 16 rows of 512 tokens are captured:
    # past that a pass is compute-bound, capture saves little and the filler rows are paid for.
    # Such shapes (218 for english, 259 for the 1,024-token variants) are captured for the first
    # seconds of the model's load (batching.PRECAPTURE_S), the rest between passes when idle, so
    # no request waits inside its pass for a capture. A pass whose rows the adapter packs tighter
    # (rows of unlike lengths) runs packed instead where its bucketed shape exceeds 768 tokens:
    # an uncaptured pass spends about that many tokens' time launching its ~460 kernels
    # (docs/benchmarks.md, "Traffic, as users send it").
    cuda_graphs = GraphPolicy(max_tokens=16 * 512, precapture=True, replay_tokens=768)

    def __init__(self, directory: str, manifest: Mapping[str, Any], limits: LayaLimits | None = None):
        super().__init__(directory, manifest, "Laya decision model")
        takes = list(manifest.get("inputs", ()))
        if tuple(takes) != INPUTS:
            raise ValueError(
                "%s: the export's graph takes %s, this server packs %s; re-export it with this "
                "version (python -m models.export laya ...)" % (directory, takes, list(INPUTS))
            )
        cfg = manifest["config"]
        self.calibration = manifest["calibration"]
        self.tok = TokenizerHandle.load(directory, ("cls_token", "sep_token", "pad_token", "mask_token"))
        self.builder = RowBuilder(self.tok, cfg["max_len"], cfg["head_max_len"])
        self.limits_ = limits or LayaLimits()
        self.adapter = LayaAdapter(self.tok.ids["pad_token"], self.calibration, max_len=cfg["max_len"])
        self.repo = manifest.get("source", {}).get("checkpoint")

    def prepare(self, body: Mapping[str, Any], profile: str = "reference") -> Prepared:
        return _prepared(*prepare_rows(body, self.builder, self.limits_, profile))

    def prepare_many(
        self, bodies: Sequence[Mapping[str, Any]], profiles: Sequence[str] | None = None
    ) -> list[Prepared | BaseException]:
        """As `prepare` for each body, with every state tokenized in one tokenizer call."""
        parsed = each(
            lambda pair: parse_request(pair[0], self.limits_, self.builder.mask, pair[1]),
            zip(bodies, profiles or ["reference"] * len(bodies), strict=True),
        )
        valid = [p for p in parsed if not isinstance(p, BaseException)]
        ids = self.tok.encode_batch([p.text for p in valid]) if valid else []
        built = iter(each(lambda pair: _prepared(*build_rows(*pair, self.builder)), zip(valid, ids, strict=True)))
        return [p if isinstance(p, BaseException) else next(built) for p in parsed]

    def finish(
        self, prepared: Prepared, output: Any, profile: str, model_name: str, requested: str | None = None
    ) -> dict:
        questions, usage = prepared.context
        logits, _, calibrated = output  # the adapter calibrated the whole batch
        if logits.shape[0] != len(questions):
            raise InferenceFailed("expected %d rows of logits, got %d" % (len(questions), logits.shape[0]))
        answers = finishing.answers(questions, calibrated)
        routing = {
            "model": self.name,
            "repo": self.repo,
            "reason": ("explicit model=%r" % requested)
            if requested
            else "the request named no model; %r is the default" % self.name,
            "detection": None,
            "workflow": None,
        }
        shape = finishing.jev_profile if profile == "jev" else finishing.reference_profile
        return shape(model_name, answers, dict(usage), routing)

    def limits(self) -> dict:
        cfg = self.manifest["config"]
        lim = self.limits_
        return {
            "max_questions": lim.max_questions,
            "max_choice_options": lim.max_choice_options,
            "max_score_levels": lim.max_score_levels,
            "max_options_total": lim.max_options_total,
            "max_state_chars": lim.max_state_chars,
            "max_len": cfg["max_len"],
            "head_max_len": cfg["head_max_len"],
            "question_types": ["choice", "score", "noul"],
            "truncates_state": True,
        }


def _prepared(questions, rows, usage) -> Prepared:
    return Prepared(
        rows=len(rows),
        tokens=usage["input_tokens"],
        longest=max(len(r.ids) for r in rows),
        work=rows,
        context=(questions, usage),
        questions=len(questions),
    )
