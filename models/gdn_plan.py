"""ONNX Runtime's GatedDeltaNet engine for a served Qwen3.5 graph: which one a session is built
with, and the process variable (`ORT_GDN_PLAN`) that carries the choice into ONNX Runtime.

The server's setting (`OMNI_CUDA_GDN_PLAN`, app/config.py) and an export's parity gate, which
runs the graph on the engine that will serve it, both choose through here.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any
from collections.abc import Iterator, Mapping

# The engines ONNX Runtime's GatedDeltaNet kernel knows ("auto": its own choice by shape).
PLANS = ("auto", "chunked", "chunked_split", "recurrent")
# The engine served unless configured otherwise: the fastest for a few rows a pass.
DEFAULT = "chunked_split"

# ONNX Runtime's chunked GatedDeltaNet engines take float16 inputs only (their matrix operands
# are fp16 fragments; its source leaves bfloat16 unwritten): forced onto another graph, such as
# the float32 export a half-precision one that failed its gate falls back to, every pass fails
# ("chunked engine requires float16 input"). ONNX Runtime's own choice serves the other dtypes
# with its recurrent engine.
FLOAT16_ONLY = ("chunked", "chunked_split")


def plan_for(plan: str, gdn_dtype: str, shared_head: bool = False) -> str:
    """The GatedDeltaNet engine to build a graph's InferenceSession with: `plan`, unless it takes
    float16 only and the graph's GatedDeltaNet layers read another dtype, or the graph takes a
    prompt head per pass (`shared_head`: a head or a pass's rows may run under the 32 tokens the
    chunked engines take); then ONNX Runtime's own ("auto"), which picks by shape."""
    if shared_head:
        return "auto"
    return "auto" if plan in FLOAT16_ONLY and gdn_dtype != "float16" else plan


def shared_head(manifest: Mapping[str, Any]) -> bool:
    """Whether an export's graph takes a prompt head per pass (models/qwen35/graph.SharedHead)."""
    return bool(manifest.get("graph", {}).get("shared_head"))


def plan_note(manifest: Mapping[str, Any], configured: str, plan: str) -> str | None:
    """Why an export's GatedDeltaNet layers do not run the configured engine, for the log; None
    when they do or the export has none of ONNX Runtime's GatedDeltaNet nodes."""
    graph = manifest.get("graph", {})
    if plan == configured or not graph.get("gdn_kernel", "").startswith("gated_delta_net"):
        return None
    if shared_head(manifest):
        return (
            "its graph takes a prompt head per pass, which may be under the 32 tokens a row %s takes: "
            "its GatedDeltaNet layers run ONNX Runtime's own engine" % configured
        )
    dtype = gdn_dtype(manifest)
    note = "its GatedDeltaNet layers read %s: they run ONNX Runtime's own engine, not %s (float16 only)" % (
        dtype,
        configured,
    )
    if dtype == "bfloat16":  # a bfloat16 graph whose export fed its GatedDeltaNet layers bfloat16
        note += (
            "; the exporter feeds them float16: running its export command again serves it on %s, faster" % configured
        )
    return note


def gdn_dtype(manifest: Mapping[str, Any]) -> str:
    """The dtype an export's GatedDeltaNet layers read: what its manifest records (a bfloat16
    graph may feed them float16), else its weights' dtype (a manifest without the record)."""
    dtype: str = manifest.get("graph", {}).get("gdn_dtype") or manifest.get("weights_dtype", "float32")
    return dtype


@contextlib.contextmanager
def engine(plan: str) -> Iterator[None]:
    """ORT_GDN_PLAN as `plan` ("auto": unset) while a session is built: ONNX Runtime's
    GatedDeltaNet kernel reads it once, when an InferenceSession creates its kernels. Build
    sessions one at a time under it (the server builds them on its executor thread), since it
    sets the process's variable."""
    before = os.environ.get("ORT_GDN_PLAN")
    if plan == "auto":
        os.environ.pop("ORT_GDN_PLAN", None)
    else:
        os.environ["ORT_GDN_PLAN"] = plan
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ORT_GDN_PLAN", None)
        else:
            os.environ["ORT_GDN_PLAN"] = before
