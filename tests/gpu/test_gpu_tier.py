"""The GPU tier (`make test-gpu`, marker `gpu`): on a machine with onnxruntime-gpu and exports of
full-size random-weight checkpoints (GPU_TIER_EXPORTS: export directories, comma-separated),
CUDA graphs on as shipped,

- the conformance suite (tests/models/conformance.py) through the executor on CUDA: each
  request's answers alone equal its answers in a concurrent mixed batch, within the export's
  bound (`bound`);
- mixed traffic through a real server at c = 1, 16 and 64: no 5xx, the model ready throughout,
  and every answer within that bound of the same request's answer at c = 1.

The bound: a float32 export answers the same alone and batched up to float32 rounding
(FLOAT32_BOUND), which is where padding that reached a real row would show. A half-precision
export answers within its parity gate's bound (models/precision.py); one whose gate was recorded
as failed (a random-weight checkpoint, whose deep random stack amplifies rounding) within the
drift its gate measured against float32: batching may move an answer no further than half
precision itself does. Where the float32 export of the same model ran the same traffic earlier in
the run (`FAMILIES="cua-s1:float32 cua-s1"`), that drift is measured on this traffic itself:
the most half precision moved any of its answers at c = 1 from float32's.

Each export's figures (commit, GPU, requests, 5xx, worst drift) are appended to
GPU_TIER_OUT (a JSON-lines file) when it is set, for docs/reliability.md. Without exports or a
CUDA provider the tier is skipped: CI has neither.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import random
import subprocess
import time

import httpx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from models.precision import MAX_DRIFT
from tests.conftest import Harness, run_server
from tests.models import conformance

pytestmark = pytest.mark.gpu

EXPORTS = [d for d in os.environ.get("GPU_TIER_EXPORTS", "").split(",") if d]
FLOAT32_BOUND = 1e-3
CONCURRENCY = (1, 16, 64)
REQUESTS = int(os.environ.get("GPU_TIER_REQUESTS", "256"))


def _cuda() -> bool:
    try:
        import onnxruntime
    except ImportError:
        return False
    return "CUDAExecutionProvider" in onnxruntime.get_available_providers()


if not EXPORTS or not _cuda():
    pytest.skip("the GPU tier needs onnxruntime's CUDA provider and GPU_TIER_EXPORTS", allow_module_level=True)


def _gpu() -> str:
    try:
        return (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
            )
            .stdout.strip()
            .splitlines()[0]
        )
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=30
        ).stdout.strip() or os.environ.get("GPU_TIER_COMMIT", "unknown")
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("GPU_TIER_COMMIT", "unknown")


def _record(row: dict) -> None:
    path = os.environ.get("GPU_TIER_OUT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"commit": os.environ.get("GPU_TIER_COMMIT") or _commit(), "gpu": _gpu(), **row}) + "\n")


@pytest.fixture(scope="module", params=EXPORTS, ids=os.path.basename)
def export(request):
    return request.param


def _dtype(export_dir: str) -> str:
    from models import manifest

    return str(manifest.read(export_dir).get("weights_dtype", "float32"))


def _alone_answers(model: str, dtype: str) -> str | None:
    """Where the traffic's answers at c=1 are kept for the other exports of the same model (one
    process an export: `make test-gpu`), beside GPU_TIER_OUT; None without it."""
    path = os.environ.get("GPU_TIER_OUT")
    return "%s.alone-%s-%s.json" % (path, model, dtype) if path else None


def traffic_bound(model: str, dtype: str, alone: list[dict | None]) -> tuple[float, str] | None:
    """For a half-precision export whose float32 sibling ran this traffic first in the same run
    (FAMILY:float32 before FAMILY in tier.sh): the most half precision moved any answer of this
    traffic from float32, as the bound batching must keep to; None without that sibling."""
    path = _alone_answers(model, "float32")
    if dtype == "float32" or path is None or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        reference = json.load(f)
    if len(reference) != len(alone):
        return None
    drift = max((_drift(r, a) for r, a in zip(reference, alone) if r and a), default=0.0)
    return max(MAX_DRIFT, drift), "this traffic's fp16 drift from the float32 export (%.4f)" % drift


def bound(export_dir: str) -> tuple[float, str]:
    """(the most an answer may move between alone and batched, where that bound comes from)."""
    from models import manifest

    meta = manifest.read(export_dir)
    if meta.get("weights_dtype", "float32") == "float32":
        return FLOAT32_BOUND, "float32"
    gate = meta.get("check", {}).get("parity_gate") or {}
    measured = gate.get("max_prob_drift")
    if gate.get("passes") is False and measured is not None and measured > MAX_DRIFT:
        return float(measured), "the export's own fp16 drift from float32 (gate recorded, not passed)"
    return MAX_DRIFT, "the fp16 parity gate"


@pytest.fixture(scope="module")
def on_cuda(export):
    h = Harness([export], device="cuda")
    slot = h.registry.slots[0]
    assert slot.device.startswith("cuda"), slot.error
    yield h, slot
    h.close()


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_conformance_on_cuda(export, on_cuda, data):
    h, slot = on_cuda
    items = data.draw(conformance.batches(slot.name, slot.model.limits(), max_words=300))
    conformance.check_batch_invariance(h, slot, items, atol=bound(export)[0], outputs=False)


def _issue_traffic(model: str, limits: dict, n: int) -> list[dict]:
    """The traffic that took a replica down: a 3-option choice each, every third request also a
    3-level score, every fourth also a noul, states of 10-150 words (for models that take those)."""
    rng = random.Random(58)
    three = {"billing": "Charges and refunds", "technical": "Software problems", "account": "Log-in"}
    out = []
    for i in range(n):
        qs = {"team": {"type": "choice", "instructions": "Which team?", "criteria": three}}
        if i % 3 == 0 and "score" in limits["question_types"]:
            qs["urgency"] = {"type": "score", "instructions": "How urgent?", "criteria": ["low", "mid", "high"]}
        if i % 4 == 0 and "noul" in limits["question_types"]:
            qs["refund"] = {"type": "noul", "instructions": "Refund asked?"}
        words = " ".join(rng.choice(conformance.WORDS) for _ in range(rng.randint(10, 150)))
        out.append({"model": model, "state": "%d %s" % (i, words), "questions": qs})
    return out


def _send(url: str, bodies: list[dict], clients: int) -> list[httpx.Response]:
    with (
        httpx.Client(timeout=120, limits=httpx.Limits(max_connections=clients)) as client,
        concurrent.futures.ThreadPoolExecutor(clients) as pool,
    ):
        return list(pool.map(lambda b: client.post(url + "/v1/systemone", json=b), bodies))


def _drift(alone: dict, other: dict) -> float:
    worst = 0.0
    for qid, a in alone["answers"].items():
        b = other["answers"][qid]
        for k, p in (a.get("probabilities") or {}).items():
            worst = max(worst, abs(p - b["probabilities"][k]))
        if a["type"] == "noul":
            worst = max(worst, abs(a["noul"] - b["noul"]))
    return worst


def test_mixed_traffic_through_a_server_at_c1_16_64(export, tmp_path):
    from models.registry import load

    model = load(export)
    limits, dtype = model.limits(), _dtype(export)
    bodies = _issue_traffic(model.name, limits, REQUESTS // 2) + conformance.traffic(
        model.name, limits, REQUESTS - REQUESTS // 2, seed=58
    )
    env = {"OMNI_MODELS": export, "OMNI_DEVICE": "cuda", "OMNI_REQUEST_TIMEOUT_S": "120"}
    with run_server(tmp_path, env, timeout=600) as s:
        row: dict = {"export": os.path.basename(export), "model": model.name, "requests": 0, "5xx": 0, "levels": {}}
        base: list[dict | None] = []
        refused: list[list[int]] = []
        worst = 0.0
        for c in CONCURRENCY:
            t0 = time.perf_counter()
            replies = _send(s.url, bodies, c)
            took = time.perf_counter() - t0
            codes = [r.status_code for r in replies]
            fivexx = sum(1 for code in codes if code >= 500)
            answers = [r.json() if r.status_code == 200 else None for r in replies]
            if c == CONCURRENCY[0]:
                base = answers
                kept = _alone_answers(model.name, dtype)
                if kept:
                    with open(kept, "w", encoding="utf-8") as f:
                        json.dump(answers, f)
            drift = max((_drift(a, b) for a, b in zip(base, answers) if a and b), default=0.0)
            worst = max(worst, drift)
            ready = httpx.get(s.url + "/readyz").status_code
            row["levels"][str(c)] = {
                "requests": len(codes),
                "5xx": fivexx,
                "4xx": sum(1 for code in codes if 400 <= code < 500),
                "worst_drift": drift,
                "ready_after": ready,
                "requests_per_s": round(len(codes) / took, 1),
            }
            refused.append([code for code in codes if code < 500])
            row["requests"] += len(codes)
            row["5xx"] += fivexx
        row["worst_drift"], (row["bound"], row["bound_from"]) = (
            worst,
            (traffic_bound(model.name, dtype, base) or bound(export)),
        )
        _record(row)
    assert row["5xx"] == 0, row
    assert all(level["ready_after"] == 200 for level in row["levels"].values()), row
    assert all(codes == refused[0] for codes in refused), row  # a request over a limit is refused at every level
    assert worst <= row["bound"] + 1e-4, row  # answers are rounded to 4 places
