"""A Clef-Flash export, served. Each request is ONE record (its questions answered jointly).

An export of the clef-joint-v1 signature (`--records single`) runs one record a pass: requests
batched together by the executor become consecutive runs. An export with batched records (the
default, `--records batched`, export_options.records) runs several records a pass, as rows of one batch
(records.py): the adapter cuts a take into passes of records of like length within a row and
token budget, and answers each record as its pass ends. Either way no record shares a sequence
or the head's attention with another.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from models.base import GraphPolicy, MicroBatches, Packed, Prepared
from models.clef_flash import finish as finishing
from models.clef_flash import records as batching
from models.clef_flash.prepare import ClefLimits, Record, head_ids, prepare_record
from models.qwen35 import prefix
from models.qwen35.served import QwenServed

# What an export's options say, as export.py writes them; defined here, on the served side, which
# never imports the exporter (torch is not in the runtime image). `records`: "batched", several
# records a pass as rows of one batch (records.py), else one record a pass.
RECORDS = "batched"
# The graph reads a record's length from token_positions' values, which may be right-padded with
# -1 (head_graph.py), so records of one bucketed width share a CUDA graph. An export whose options
# lack token_positions="padded" reads it from the length and is served without graphs.
TOKEN_POSITIONS = "padded"

PAD_TO = 64  # the clef-joint-v1 convention: ids right-padded to a multiple of 64


def _padded(n: int) -> int:
    """`n` ids (after the baked head) rounded up to PAD_TO."""
    return -(-n // PAD_TO) * PAD_TO


class RecordAdapter:
    """`head`: the prompt head the graph has baked in (export.py), cut off each record's ids; the
    positions and spans stay the whole record's. `padded_positions`: the graph reads a record's
    length from token_positions' values (TOKEN_POSITIONS), so they are right-padded with
    -1 to the ids' width and every feed's shape depends only on the padded width and the
    record's question and option counts: records of like shape share one CUDA graph."""

    def __init__(self, pad_id: int, key: str = "clef_flash", head: Sequence[int] = (), padded_positions: bool = False):
        self.pad_id, self.key = pad_id, key
        self.head = list(head)
        self.padded_positions = padded_positions

    def compatible(self, prepared: Prepared) -> Hashable:
        return self.key

    def width(self, tokens: int) -> int:
        """The padded length of the ids the graph runs for a record of `tokens` tokens."""
        return _padded(tokens - len(self.head))

    def feeds(self, record: Record) -> dict[str, np.ndarray]:
        n = record.tokens
        ids = np.full((1, self.width(n)), self.pad_id, dtype=np.int64)
        ids[0, : n - len(self.head)] = prefix.cut(record.input_ids, self.head) if self.head else record.input_ids
        positions = np.arange(n, dtype=np.int64)
        if self.padded_positions:
            positions = np.pad(positions, (0, len(self.head) + ids.shape[1] - n), constant_values=-1)
        return dict(
            zip(
                batching.INPUTS,
                (
                    ids,
                    positions,
                    record.question_spans,
                    record.question_types,
                    record.option_spans,
                    record.option_question,
                ),
                strict=True,
            )
        )

    def pack(self, works: Sequence[Record], static: bool = False) -> Packed:
        parts = [self.feeds(r) for r in works]
        return Packed(
            parts[0],
            rows=len(parts),
            real_tokens=sum(r.tokens - len(self.head) for r in works),
            padded_tokens=sum(p["input_ids"].shape[1] for p in parts),
            parts=parts,
            ready=list(range(len(parts))),
            meta={"micro_batches": len(parts)},
        )

    def unpack(self, outputs, works: Sequence[Record], packed: Packed, only: Sequence[int] | None = None) -> list:
        """Each record is complete after its own run (`ready`), so the executor answers it then."""
        return [outputs[i][0] for i in (range(len(works)) if only is None else only)]


class BatchedRecordAdapter(RecordAdapter):
    """Records as rows of one pass (records.py), in the micro-batches the batching policy cuts
    (`parts`); each record is answered as its pass ends (`Packed.ready`)."""

    def __init__(self, pad_id: int, key: str = "clef_flash", head: Sequence[int] = ()):
        super().__init__(pad_id, key, head, padded_positions=True)

    @staticmethod
    def bucket(n: int) -> int:
        return _padded(n)

    def row_lengths(self, works: Sequence[Record]) -> tuple[list[int], list[int]]:
        """Each record's ids after the baked head, and its own index: a record is one row."""
        return [r.tokens - len(self.head) for r in works], list(range(len(works)))

    def pack(
        self, works: Sequence[Record], static: bool = False, parts: Sequence[Sequence[int]] | None = None
    ) -> Packed:
        """`parts`: the passes as record indices, in run order (None: one pass of all). `static`
        changes nothing: widths are already multiples of 64."""
        cut = [list(range(len(works)))] if parts is None else [list(c) for c in parts]
        feeds, ready = [], [0] * len(works)
        for p, chunk in enumerate(cut):
            width = self.width(max(works[i].tokens for i in chunk))
            feeds.append(batching.pack([works[i] for i in chunk], width, self.pad_id, self.head))
            for i in chunk:
                ready[i] = p
        return Packed(
            feeds[0],
            rows=len(works),
            real_tokens=sum(r.tokens - len(self.head) for r in works),
            padded_tokens=sum(int(np.prod(f["input_ids"].shape)) for f in feeds),
            parts=feeds,
            layout=cut,
            ready=ready,
            meta={"micro_batches": len(feeds)},
        )

    def unpack(self, outputs, works: Sequence[Record], packed: Packed, only: Sequence[int] | None = None) -> list:
        """Each record's logits from its pass's (`only`: those records alone, whose passes ran)."""
        mine: dict[int, np.ndarray] = {}
        for p, chunk in enumerate(packed.layout[: len(outputs)]):
            mine.update(zip(chunk, batching.split(outputs[p][0], [works[i] for i in chunk]), strict=True))
        return [mine[i] for i in (range(len(works)) if only is None else only)]


class ClefFlashModel(QwenServed):
    family = "clef_flash"
    # An export that runs one record a pass: the bounds are a record's. A record's feeds have the
    # shape of its padded width and its question and option counts: a client's fixed schema over
    # states of like length recurs, and a one-off never pays for a capture.
    graph_policy = GraphPolicy(capture_after=2, max_tokens=1024, per_work=True)
    prompt_head_unit = "record"

    def __init__(self, directory: str, manifest: Mapping[str, Any], limits: ClefLimits | None = None):
        super().__init__(directory, manifest, "Clef-Flash")
        self.limits_ = limits or ClefLimits()
        options = self.manifest.get("export_options", {})
        padded = options.get("token_positions") == TOKEN_POSITIONS
        head = self.baked_head(head_ids(self.tok))
        if options.get("records") == RECORDS:
            # Passes of several records: the bounds are the take's, as for the other Qwen models.
            self.cuda_graphs = QwenServed.cuda_graphs
            self.micro_batches = MicroBatches(max_rows=8, max_tokens=4096)
            self.adapter = BatchedRecordAdapter(self.pad_id, head=head)
        else:
            # A graph without padded token positions reads a record's length from token_positions'
            # length, which makes every record a new shape, so it runs without CUDA graphs.
            self.cuda_graphs = self.graph_policy if padded else None
            self.micro_batches = None  # one record a pass: RecordAdapter's parts
            self.adapter = RecordAdapter(self.pad_id, head=head, padded_positions=padded)

    def notes(self) -> list[str]:
        out = super().notes()
        if self.cuda_graphs is None:
            out.append(
                "its graph takes a record's length from the shape of its positions, so every record is a new "
                "shape and it runs without CUDA graphs; the exporter writes a graph that replays them for "
                "records of recurring shape; running its export command again writes that"
            )
        return out

    def prepare(self, body: Mapping[str, Any], profile: str = "reference") -> Prepared:
        record = prepare_record(body, self.tok, self.limits_)
        return Prepared(
            rows=1,
            tokens=record.tokens,
            longest=self.adapter.width(record.tokens),
            work=record,
            context=record,
            questions=len(record.fields),
        )

    def finish(
        self, prepared: Prepared, output: Any, profile: str, model_name: str, requested: str | None = None
    ) -> dict:
        # Upstream echoes the request's `model`; a request that named none gets the served name.
        return finishing.finish(prepared.context, output, requested or model_name, profile)

    def limits(self) -> dict:
        lim = self.limits_
        return {
            "max_questions": lim.max_questions,
            "max_choice_options": lim.max_options,
            "max_score_levels": lim.max_levels,
            "max_state_tokens": lim.max_state_tokens,
            "max_length": lim.max_length,
            "question_types": ["choice", "score", "noul"],
            "truncates_state": True,
            "joint_questions": True,
        }

    def describe_extra(self) -> dict:
        return {
            "note": "answers depend on the question ids and on the other questions of the request: "
            "the model reads them all in one sequence"
        }


def load(directory: str, manifest: Mapping[str, Any]) -> ClefFlashModel:
    return ClefFlashModel(directory, manifest)
