"""Several Clef-Flash records as one pass of the batched joint graph (export option
`records="batched"`, export.py), and the logits back to each record.

The graph takes the records as rows of ids (each right-padded to the pass's width, after the
baked prompt head) with their positions padded with -1; their questions and options are
concatenated, options pointing at their question in the concatenation, and `question_record`
names each question's row. Spans stay within a record. The joint head keeps every mean and
attention inside its own record (head_graph.ClefJointHead), and the backbone is causal with the
pads at the end, so a record's logits do not depend on what it ran with.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from models.clef_flash.prepare import Record
from models.qwen35 import prefix

# The joint graph's inputs: clef-joint-v1's (§5.5) and, where records run batched, each
# question's record.
INPUTS = ("input_ids", "token_positions", "question_spans", "question_types", "option_spans", "option_question")
BATCHED_INPUTS = INPUTS + ("question_record",)


def pack(records: Sequence[Record], width: int, pad_id: int, head: Sequence[int] = ()) -> dict[str, np.ndarray]:
    """The batched graph's feeds for `records`, their ids padded to `width` tokens after `head`."""
    ids = np.full((len(records), width), pad_id, dtype=np.int64)
    positions = np.full((len(records), len(head) + width), -1, dtype=np.int64)
    offsets = np.cumsum([0] + [len(r.question_types) for r in records])
    for b, r in enumerate(records):
        row = prefix.cut(r.input_ids, head) if head else r.input_ids
        ids[b, : len(row)] = row
        positions[b, : r.tokens] = np.arange(r.tokens)
    cat = lambda arrays: np.concatenate(arrays).astype(np.int64)  # noqa: E731
    return dict(
        zip(
            BATCHED_INPUTS,
            (
                ids,
                positions,
                cat([r.question_spans for r in records]).reshape(-1, 2),
                cat([r.question_types for r in records]),
                cat([r.option_spans for r in records]).reshape(-1, 2),
                cat([r.option_question + offsets[b] for b, r in enumerate(records)]),
                cat([np.full(len(r.question_types), b) for b, r in enumerate(records)]),
            ),
            strict=True,
        )
    )


def split(logits: np.ndarray, records: Sequence[Record]) -> list[np.ndarray]:
    """A pass's logits [Σ options], one array per record, in order."""
    return np.split(np.asarray(logits), np.cumsum([len(r.option_question) for r in records])[:-1])
