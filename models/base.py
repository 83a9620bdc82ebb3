"""What a served model family provides to the runtime: prepare → execute → finish.

The runtime (app/runtime) knows only these shapes. Preparation validates the whole request and
returns `Prepared`: the executor work plus the context finishing needs. It knows the response
profile, where a family accepts more in the `jev` profile than its reference does. The model's
`BatchAdapter` packs the work of one or more requests into the ORT session's input layout and
unpacks outputs back to each request; finishing calibrates and decodes one request's outputs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

import numpy as np


@dataclass(frozen=True)
class GraphPolicy:
    """What a model tells the batching policy (app/runtime/batching.py) about its CUDA graphs.

    Replay saves the launch overhead of a thousand-odd kernels, which matters only while a pass
    is launch-bound (few rows, few tokens), and each capture costs a few passes' time, spent
    between passes while the executor is idle. Models whose shapes are few (Laya's buckets) list
    them all, captured at load as time allows and when idle after; models whose every request can
    be a new length capture only shapes that recur, and only small ones, except those whose
    one-row passes are launch-bound (Cua-S1, Open-Jev), which list their one-row length buckets too."""

    capture_after: int = 1  # sightings of a shape before it is due for capture (1: the first)
    max_tokens: int = 0  # rows × longest row above which a pass runs uncaptured; 0: no bound
    precapture: bool = False  # capture the shapes the adapter lists (`capture_batches`) at load, then idle
    per_work: bool = False  # each work runs as a pass of its own: bounds apply per work
    # For adapters that pack a pass at its own shape tighter than at its bucketed one
    # (`padded_tokens`): the batch tokens a replay runs in the time an uncaptured pass takes to
    # launch its kernels. A pass runs packed, uncaptured, only where its bucketed shape holds more
    # tokens than both its packed shape and this: below it the launches, not the tokens, set an
    # uncaptured pass's time. 0: bucketed whenever the bounds above allow.
    replay_tokens: int = 0


@dataclass(frozen=True)
class MicroBatches:
    """Bounds on the micro-batches the batching policy cuts a take into, for adapters whose rows
    each end at their own last token (`row_lengths`, `bucket`, `pack(..., parts=)`)."""

    max_rows: int = 64
    max_tokens: int = 32768  # rows × padded length of one micro-batch
    max_row_padding: int = 256  # pads one row may carry: past this, one more pass costs less


@dataclass
class Prepared:
    """One request, ready for the executor."""

    rows: int  # batch rows the work occupies
    tokens: int  # real (unpadded) tokens: what `usage` counts
    longest: int  # longest row, in tokens: decides the padded length
    work: Any  # adapter-specific input, packed with other requests' work
    context: Any  # what finishing needs, never seen by the executor
    questions: int = 0


@dataclass
class Packed:
    """A batch in the ORT session's input layout, with what telemetry reports about it."""

    feeds: dict[str, np.ndarray]
    rows: int
    real_tokens: int
    padded_tokens: int
    meta: dict[str, Any] = field(default_factory=dict)
    # Micro-batches: when set, the executor runs each feed dict in turn (within the device's
    # budget, or one record per run for per-record graphs) and `unpack` receives one output
    # list per part instead of one output list. `feeds` is then the first part.
    parts: list[dict[str, np.ndarray]] | None = None
    layout: Any = None  # the adapter's own note of where each row went, for `unpack`
    # With `parts`: per work, the index of the part after which all its rows have run. The
    # executor settles those works then, with `unpack(..., only=...)` on the outputs so far: a
    # short request taken with long ones need not wait for their parts.
    ready: list[int] | None = None


@runtime_checkable
class BatchAdapter(Protocol):
    """How a family's prepared works become one pass's feeds and its outputs become results.

    What a pass's outputs hold past the works: a bucketed pass (`static`) has filler rows after
    the real ones, and any pass may have columns past a work's own (marker or option columns that
    another work or the bucket widened it to). `unpack` returns each work's own rows and nothing
    past them, so that finishing never sees padding: a work's results are the same whatever it
    was batched with, on every device (tests/models/conformance.py)."""

    def compatible(self, prepared: Prepared) -> Hashable:
        """Work with equal keys may share one forward pass."""

    def pack(self, works: Sequence[Any], static: bool = False) -> Packed:
        """`static`: pad to the adapter's bucketed shapes, the few a GPU captures as CUDA graphs
        and the batching policy asks for on every device while a pass is small."""

    def unpack(
        self, outputs: Sequence[Any], works: Sequence[Any], packed: Packed, only: Sequence[int] | None = None
    ) -> list[Any]:
        """Split the batch outputs back into one result per work item, in order. `outputs`: the
        session's output list, or with `Packed.parts` one such list per part run so far. `only`
        (adapters that set `Packed.ready`): the results of just those works."""


@runtime_checkable
class CapturingAdapter(BatchAdapter, Protocol):
    """The adapter of a model whose GraphPolicy has `precapture`."""

    def capture_batches(self, graph_rows: int, max_tokens: int) -> list[list[Any]]:
        """One batch of works per bucketed shape to capture as the model loads, fewest tokens first."""


@runtime_checkable
class MicroBatchAdapter(BatchAdapter, Protocol):
    """The adapter of a model with `micro_batches`: the batching policy cuts its rows into parts,
    and `pack(works, static, parts=)` lays them out (parts: row indices, in run order; None: one
    part of every row)."""

    def pack(self, works: Sequence[Any], static: bool = False, parts: Sequence[Sequence[int]] | None = None) -> Packed:
        """`parts`: each micro-batch's row indices, in run order; None: one part of every row."""

    def row_lengths(self, works: Sequence[Any]) -> tuple[list[int], list[int]]:
        """Each row's length as the graph runs it, and the index of the work it belongs to."""

    def bucket(self, n: int) -> int:
        """The padded length of a part whose longest row has n tokens."""


class ServedModel(Protocol):
    name: str
    cuda_graphs: GraphPolicy | None  # None: never capture
    micro_batches: MicroBatches | None  # None: the adapter's pack lays out the whole take
    aliases: tuple[str, ...]
    description: str
    onnx_path: str
    adapter: BatchAdapter
    manifest: Mapping[str, Any]

    def prepare(self, body: Mapping[str, Any], profile: str = "reference") -> Prepared: ...

    def prepare_many(
        self, bodies: Sequence[Mapping[str, Any]], profiles: Sequence[str] | None = None
    ) -> list[Prepared | BaseException]: ...

    def finish(
        self, prepared: Prepared, output: Any, profile: str, model_name: str, requested: str | None = None
    ) -> dict[str, Any]:
        """The response for one request from its results; `requested`: the model name the client
        sent (an alias answers as itself)."""

    def warmup_body(self) -> dict[str, Any]: ...

    def limits(self) -> dict[str, Any]: ...

    def describe(self) -> dict[str, Any]: ...

    def notes(self) -> list[str]: ...


# docs/api.md's example request: the warm-up of models that take it as it is.
API_EXAMPLE = {
    "state": "I was charged twice for my order. Please refund the duplicate today.",
    "questions": {
        "department": {
            "type": "choice",
            "instructions": "Which team should handle this?",
            "criteria": {"billing": "Charges and refunds", "technical": "Software problems"},
        },
        "urgency": {
            "type": "score",
            "instructions": "How urgent is the request?",
            "criteria": ["Not urgent", "Needs attention soon", "Needs attention immediately"],
        },
        "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
    },
}


def each(fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
    """`fn(item)` for each item, or the exception it raised: one bad item fails alone."""
    out: list[Any] = []
    for item in items:
        try:
            out.append(fn(item))
        except Exception as exc:
            out.append(exc)
    return out


class ExportedModel:
    """What every served export shares: its names and graph from the manifest, the warm-up
    request, and the common part of its /v1/models entry. Families add preparation, finishing,
    the batch adapter, `limits()` and `describe_extra()`."""

    family = ""
    warmup_request: Mapping[str, Any] = API_EXAMPLE
    cuda_graphs: GraphPolicy | None = GraphPolicy()  # which bucketed shapes the executor captures
    micro_batches: MicroBatches | None = None

    def __init__(self, directory: str, manifest: Mapping[str, Any], description: str):
        self.directory, self.manifest = directory, manifest
        self.name = manifest["name"]
        self.aliases = tuple(manifest.get("aliases", ()))
        self.description = manifest.get("description", description)
        self.onnx_path = os.path.join(directory, manifest["onnx"])

    def warmup_body(self) -> dict[str, Any]:
        return {"model": self.name, **self.warmup_request}

    def prepare(self, body: Mapping[str, Any], profile: str = "reference") -> Prepared:
        """One request validated, rendered and tokenized (ServedModel.prepare): the family's."""
        raise NotImplementedError

    def prepare_many(
        self, bodies: Sequence[Mapping[str, Any]], profiles: Sequence[str] | None = None
    ) -> list[Prepared | BaseException]:
        """`prepare` for requests that arrived together (`profiles`: each one's response profile,
        else `reference`): each body's Prepared, or the exception its preparation raised, so a
        bad request fails alone. Families whose preparation has a cost per call that several
        requests can share (one tokenizer call) override it."""
        return each(lambda pair: self.prepare(*pair), zip(bodies, profiles or ["reference"] * len(bodies), strict=True))

    def limits(self) -> dict[str, Any]:
        return {}

    def describe_extra(self) -> dict[str, Any]:
        return {}

    def notes(self) -> list[str]:
        """What the server's log should say about this export at load: weights not folded, a
        parity gate that did not run, failed or ran on the CPU after CUDA failed; families add
        their own (an outdated graph, say)."""
        out, meta = [], self.manifest
        if not meta.get("weights_folded"):
            out.append(
                "its weight transforms are not folded into its weights: ONNX Runtime folds them at every "
                "start, which slows it; `python -m models.fold %s` folds them once, in place" % self.directory
            )
        gate = meta.get("check", {}).get("parity_gate")
        if gate is not None and "not_run" in gate:
            out.append(
                "a %s export whose parity gate against float32 did NOT RUN at export (%s); it was exported "
                "with --parity-gate record" % (meta.get("weights_dtype"), gate["not_run"])
            )
        elif gate is not None and gate.get("cuda_failed"):
            out.append(
                "a %s export gated against float32 on the CPU, not on CUDA, because %s at export: the CPU "
                "understates the drift CUDA serves; export it again where CUDA works"
                % (meta.get("weights_dtype"), gate["cuda_failed"])
            )
        if gate is not None and "not_run" not in gate and not gate.get("passes"):
            out.append(
                "a %s export that FAILED its parity gate against float32 at export (max probability drift "
                "%s, top choice %s); it was exported with --parity-gate record"
                % (meta.get("weights_dtype"), gate.get("max_prob_drift"), gate.get("top_choice_identical"))
            )
        if meta.get("host_arithmetic"):
            nodes = meta["host_arithmetic"]
            out.append(
                "its graph does arithmetic between input sizes and data at %d node(s) (%s), which ONNX Runtime "
                "runs on the CPU: on CUDA it will not capture CUDA graphs and serves without them "
                "(models/placement.py)" % (len(nodes), ", ".join(nodes[:5]))
            )
        return out

    def describe(self) -> dict[str, Any]:
        src = self.manifest.get("source", {})
        return {
            "name": self.name,
            "description": self.description,
            "aliases": list(self.aliases),
            # Jev clients expect a release date; an export carries the date it was made.
            "release_date": str(self.manifest.get("exported_at", "1970-01-01"))[:10],
            "family": self.family,
            "checkpoint": src.get("checkpoint"),
            "revision": src.get("revision"),
            "random_weights": bool(self.manifest.get("random_weights")),
            "weights_dtype": self.manifest.get("weights_dtype", "float32"),
            **self.parity_gate(),
            **self.describe_extra(),
            "limits": self.limits(),
        }

    def parity_gate(self) -> dict[str, Any]:
        """{"parity_gate": its measures} for a half-precision export whose manifest records the gate."""
        gate = self.manifest.get("check", {}).get("parity_gate")
        if gate is None:
            return {}
        keys = ("passes", "max_prob_drift", "top_choice_identical", "device", "mode", "not_run", "cuda_failed")
        return {"parity_gate": {k: gate[k] for k in keys if k in gate}}
