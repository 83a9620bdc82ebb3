"""The reduced-precision parity gate for Qwen3.5-backbone exports (models.precision's measures).

A half-precision export is run on ONNX Runtime over random prompts of 80-400 tokens, and the
family's own decision distributions from its hidden states (Cua-S1: the letter rows' softmax;
Open-Jev: the calibrated yes/no) are compared with those of a float32 reference: the same module
and weights, computed in float32 without TF32.

The reference is streamed one layer at a time (each layer copied to float32 on the device, run
over every prompt, then freed), so it needs one float32 layer of memory besides the exported
module, not a float32 copy of the model (108 GB for the 27B). It runs on CUDA through torch where
torch has a GPU, else on the CPU. Its weights are the exported ones upcast: fp16 holds a
checkpoint's bf16 weights exactly except values below fp16's normal range (|w| < 6.1e-5), so the
gate measures the arithmetic, which is what differs between providers and dtypes.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Sequence

import numpy as np

from models import gdn_plan as engines
from models import precision
from models.qwen35 import export as qexport
from models.qwen35 import gdn

PROMPTS = 8
MIN_TOKENS, MAX_TOKENS = 80, 400
CUDA_ONLY_KERNELS = gdn.CUDA_KERNELS

Distributions = Callable[[np.ndarray], Sequence[np.ndarray]]


def prompts(
    vocab: int, n: int = PROMPTS, lo: int = MIN_TOKENS, hi: int = MAX_TOKENS, seed: int = 0
) -> list[np.ndarray]:
    """`n` random id rows of lo..hi tokens (int64, [1, T])."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, size=(1, int(t)), dtype=np.int64) for t in rng.integers(lo, hi + 1, size=n)]


@contextlib.contextmanager
def _exact_float32():
    """float32 matmuls and convolutions without TF32 for the reference."""
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def reference_device() -> str:
    """Where torch runs the reference: CUDA when torch has one."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def float32_copy(part, device: str):
    """A float32 copy of a module part on `device` (the reference reads float32 weights)."""
    import torch

    return copy.deepcopy(part).to(device=device, dtype=torch.float32)


def float32_layers(module, device: str):
    """`module`'s layers one at a time as float32 copies on `device`, for the reference maths: no
    baked head, float32 GDN inputs. The caller holds torch.no_grad() and _exact_float32()."""
    for layer in module.layers:
        ref = float32_copy(layer, device)
        (ref.linear_attn if ref.kind == "linear_attention" else ref.self_attn).set_prefix(None, None)
        if ref.kind == "linear_attention":
            ref.linear_attn.gdn_dtype = None  # the reference reads float32 throughout
        yield ref
        del ref


def reference_hidden(module, rows: Sequence[np.ndarray], device: str = "cpu") -> list[np.ndarray]:
    """Final-norm hidden states [T, H] (float64) of each id row, computed in float32 one layer at
    a time from `module`'s weights (any dtype). A module with a baked prompt head reads each row
    after it: the reference runs the whole prompt, head included, from scratch, and returns the
    positions the module's readout returns (the row's; every one for the "all" readout)."""
    import torch

    head = list(module.prefix_ids)
    with torch.no_grad(), _exact_float32():
        weight = module.embed_tokens.weight
        xs = [
            weight[torch.tensor(head + r[0].tolist(), dtype=torch.long)].to(device=device, dtype=torch.float32)[None]
            for r in rows
        ]
        rope = [module.rope(x.shape[1], device, torch.float32) for x in xs]
        for ref in float32_layers(module, device):  # Layer.forward: the reference maths, unfused
            xs = [ref(x, cos, sin) for x, (cos, sin) in zip(xs, rope, strict=True)]
        norm = float32_copy(module.norm, device)
        start = 0 if module.readout == "all" else len(head)
        out = [norm(x)[0, start:].double().cpu().numpy() for x in xs]
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def feeds(ids: np.ndarray, shared: bool = False) -> dict[str, np.ndarray]:
    """A per-row readout graph's feeds for rows `ids` [B, T] of one length, read at their last
    token. A graph that takes a prompt head per pass (`shared`, graph.SharedHead) gets the first
    row's first half as the head and each row's second half after it: one row exactly as run
    whole, several as candidates that continue one state (what its served passes run)."""
    b, t = ids.shape
    if not shared:
        return {"input_ids": ids, "positions": np.full((b,), t - 1, dtype=np.int64)}
    if t < 2:
        raise ValueError("a shared-head graph needs rows of 2 tokens or more (a head and a token after it)")
    h = t // 2
    return {"head_ids": ids[:1, :h], "input_ids": ids[:, h:], "positions": np.full((b,), t - h - 1, dtype=np.int64)}


def graph_hidden(session, readout: str, rows: Sequence[np.ndarray], shared: bool = False) -> list[np.ndarray]:
    """The export's final-norm hidden state at each row's last token (float64 [H]); `shared`: a
    graph that takes a prompt head per pass (`feeds`)."""
    out = []
    for r in rows:
        if readout == "all":
            (states,) = session.run(["hidden_states"], {"input_ids": r})
            out.append(np.asarray(states[0, -1], dtype=np.float64))
        else:
            (hidden,) = session.run(["hidden"], feeds(r, shared))
            out.append(np.asarray(hidden[0], dtype=np.float64))
    return out


def session_for(onnx_path: str, kernel: str, dtype: str, gdn_plan: str, shared: bool = False) -> tuple:
    """(session, provider used, record): an ONNX Runtime session for the gate of a graph whose
    GatedDeltaNet layers read `dtype` (qexport.gdn_dtype), its engine the one the server will build
    it with (`gdn_plan`, the server's `OMNI_CUDA_GDN_PLAN`, where that dtype allows it:
    gdn_plan.plan_for): the engines round differently. The record names the engine, as it names
    a CUDA provider that failed."""
    plan = engines.plan_for(gdn_plan, dtype, shared)
    with engines.engine(plan):
        found, used, why = precision.gate_session(onnx_path)
    record = {"gdn_plan": plan} if used == "cuda" and kernel in CUDA_ONLY_KERNELS else {}
    return found, used, precision.with_cuda_failure(record, why)


def release(module) -> None:
    """Free `module`'s weights (each parameter and buffer becomes an empty tensor): an export's
    module is spent once its reference has run, and a 27B one holds 54 GB of host memory that
    the gate's ONNX Runtime session needs while it loads."""
    import gc

    import torch

    with torch.no_grad():
        for tensor in list(module.parameters()) + list(module.buffers()):
            tensor.data = torch.empty(0, dtype=tensor.dtype)
    gc.collect()


def run(
    module,
    onnx_path: str,
    distributions: Distributions,
    *,
    kernel: str,
    mode: str = "enforce",
    progress=print,
    n: int = PROMPTS,
    lo: int = MIN_TOKENS,
    hi: int = MAX_TOKENS,
    spend: bool = False,
    gdn_plan: str = engines.DEFAULT,
) -> dict:
    """Gate the export at `onnx_path` of `module` (the module it was traced from): the parity
    measures, where each side ran, and the hidden states' relative error; raises
    precision.GateFailed under `enforce` when it fails. `spend`: release the module's weights
    once the reference has run (the exporters do; the module is not used after its gate);
    `gdn_plan`: the GatedDeltaNet engine the export will be served with (session_for)."""
    from models.qwen35.graph import SharedHead

    shared = isinstance(module, SharedHead)
    backbone = module.backbone if shared else module
    dtype, gdn_in = qexport.model_dtype(module), qexport.gdn_dtype(module)
    reason = unavailable(dtype, kernel)
    if reason:
        return not_run(reason, mode)
    rows = prompts(module.d.vocab_size, n, lo, hi)
    where = reference_device()
    progress(
        "parity gate: float32 reference on %s (%d prompts of %d-%d tokens, one layer at a time) ..."
        % (where, n, min(r.shape[1] for r in rows), max(r.shape[1] for r in rows))
    )
    want = [h[-1] for h in reference_hidden(backbone, rows, where)]
    readout = module.readout
    if spend:
        release(module)
    session, used, engine = session_for(onnx_path, kernel, gdn_in, gdn_plan, shared)
    progress("parity gate: the export on ONNX Runtime (%s) ..." % used)
    got = graph_hidden(session, readout, rows, shared)
    del session
    rel = max(float(np.linalg.norm(g - w) / np.linalg.norm(w)) for g, w in zip(got, want, strict=True))
    probs = [p for h in got for p in distributions(h[None])]
    refs = [p for h in want for p in distributions(h[None])]
    result = dict(
        precision.gate_rows(probs, refs),
        device=used,
        reference_device=where,
        prompt_tokens=[int(r.shape[1]) for r in rows],
        final_hidden_rel_err=rel,
        **engine,
    )
    return precision.judge(result, mode)


def unavailable(dtype: str, kernel: str) -> str | None:
    """Why this export's gate cannot run on this machine, or None: a CUDA-only GDN kernel, or a
    bfloat16 graph (ONNX Runtime's CPU provider has no bfloat16 kernels for its matrix
    products), where ONNX Runtime has no CUDA provider."""
    if dtype == "float32":
        return None
    if kernel in CUDA_ONLY_KERNELS:
        needs = "--gdn-kernel %s runs on CUDA only" % kernel
    elif dtype == "bfloat16":
        needs = "ONNX Runtime's CPU provider has no bfloat16 kernels for this graph"
    else:
        return None
    if not precision.cuda_listed():
        return needs + ", and " + precision.NO_CUDA
    return None


def check_options(dtype: str, kernel: str, mode: str) -> None:
    """Refuse bad options, and before the export what the gate could not do after it
    (`unavailable`) under enforce; under record the export goes on and its manifest says the
    gate did not run."""
    gdn.check_kernel(kernel)
    precision.check_gate_mode(mode)
    reason = unavailable(dtype, kernel)
    if reason and mode == "enforce":
        raise precision.GateUnavailable(
            "a %s export's parity gate cannot run here: %s. Export where ONNX Runtime has CUDA, or pass "
            "--parity-gate record to export without the gate (the manifest says it did not run)" % (dtype, reason)
        )


def not_run(reason: str, mode: str) -> dict:
    """The gate's record when it could not run (`unavailable`); a failure, as judge sees it."""
    return precision.judge({"rows": 0, "passes": False, "not_run": reason}, mode)


def letter_distributions(letter_rows: np.ndarray) -> Distributions:
    """Cua-S1: softmax over the 26 letter logits (hidden · rows, float64), before bf16 rounding."""
    rows = np.asarray(letter_rows, dtype=np.float64)
    return lambda hidden: [precision.softmax(h @ rows.T) for h in hidden]


def noul_distributions(weight: np.ndarray, bias: float, temperature: float) -> Distributions:
    """Open-Jev: one candidate's yes/no, softmax([0, score] / T) (models.md §4.4)."""
    w = np.asarray(weight, dtype=np.float64)

    def dist(hidden):
        return [precision.softmax(np.array([0.0, float(h @ w) + bias]) / temperature) for h in hidden]

    return dist
