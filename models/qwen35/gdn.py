"""The Gated DeltaNet recurrence as torch custom ops that export to ONNX Runtime kernels.

transformers' chunked GDN loops over 64-token chunks in Python, so tracing it bakes the sequence
length into the graph. Wrapping the recurrence in a custom op keeps the exported graph dynamic
in batch and sequence and lets the exporter emit ONNX Runtime's own kernels (models.md §6.3),
one of two (`--gdn-kernel`):

* "linear_attention": com.microsoft `LinearAttention(update_rule="gated_delta")`, with CPU and
  CUDA kernels: the portable one, and what the tests run;
* "gated_delta_net_fused": com.microsoft `GatedDeltaNet`, CUDA only, fed the causal conv's
  output whole (packed q|k|v: no split kernel) and the raw gate logits, whose decay
  `-exp(A_log)·softplus(a + dt_bias)` and `sigmoid(b)` it computes inside in fp32, with the
  inverse GQA, the q/k L2 norm and the initial state (`gated_delta_fused`).

Inputs (one layer): q, k [B, T, Hk, Dk] after the causal conv (not yet normalised) and v [B, T,
Hv, Dv], in the model's dtype; g (log decay) and beta [B, T, Hv], float32. Output [B, T, Hv, Dv]
in v's dtype; the recurrence itself runs in fp32 (GatedDeltaNet takes half-precision q/k/v
directly; LinearAttention gets them cast). The state starts at zero, or at a given state: the
fixed prompt head's, computed once at export (prefix.py). A state is V-major, [B, Hv, Dv, Dk]
float32, as ONNX Runtime's GatedDeltaNet holds it.
"""

from __future__ import annotations


import torch

KERNELS = ("linear_attention", "gated_delta_net_fused")
# The kernels that read q/k/v in the graph's dtype (LinearAttention gets them cast to fp32).
CUDA_KERNELS = ("gated_delta_net_fused",)
EPS = 1e-6


def input_dtype(dtype: str, kernel: str) -> str:
    """The dtype the GatedDeltaNet kernel reads in a `dtype` graph. ONNX Runtime's chunked engines
    take float16 only and run bfloat16 on its slower recurrent engine, so a bfloat16 graph casts
    the kernel's inputs to float16 and its output back: bfloat16 values are exact in float16 from
    6.1e-5 to 65504, and the kernel's inputs follow a norm and a projection, far inside that."""
    if dtype == "bfloat16" and kernel in CUDA_KERNELS:
        return "float16"
    return dtype


def check_kernel(kernel: str) -> None:
    if kernel not in KERNELS:
        raise ValueError("unknown GDN kernel %r (known: %s)" % (kernel, ", ".join(KERNELS)))


def _l2norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + EPS)


def recurrence(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-by-token reference recurrence (models.md §6.2 step 5) from `state` (V-major; None:
    zeros): the output [B, T, Hv, Dv] in v's dtype and the state after the last token (fp32)."""
    b, t, hk, dk = q.shape
    hv, dv = v.shape[-2:]
    rep = hv // hk
    dtype = v.dtype
    q = _l2norm(q.float()).repeat_interleave(rep, dim=2) * dk**-0.5
    k = _l2norm(k.float()).repeat_interleave(rep, dim=2)
    v, g, beta = v.float(), g.float(), beta.float()
    # Held K-major here ([B, Hv, Dk, Dv]): the sums below read it that way.
    state = q.new_zeros(b, hv, dk, dv) if state is None else state.float().transpose(-1, -2).expand(b, -1, -1, -1)
    out = q.new_empty(b, t, hv, dv)
    for i in range(t):
        state = state * g[:, i].exp()[..., None, None]
        memory = (state * k[:, i, :, :, None]).sum(-2)  # S^T k   [B, Hv, Dv]
        delta = (v[:, i] - memory) * beta[:, i, :, None]
        state = state + k[:, i, :, :, None] * delta[:, :, None, :]
        out[:, i] = (state * q[:, i, :, :, None]).sum(-2)
    return out.to(dtype), state.transpose(-1, -2).contiguous()


@torch.library.custom_op("omni_qwen35::gated_delta", mutates_args=())
def gated_delta(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor | None = None,
) -> torch.Tensor:
    """The recurrence's output (what torch runs; exported as `translation()`)."""
    return recurrence(q, k, v, g, beta, state)[0]


@gated_delta.register_fake
def _(q, k, v, g, beta, state=None):
    return torch.empty_like(v)


def split_qkv(qkv: torch.Tensor, key_heads: int, key_dim: int, value_heads: int, value_dim: int):
    """q, k [B, T, Hk, Dk] and v [B, T, Hv, Dv] from the conv output [B, T, 2·Hk·Dk + Hv·Dv]."""
    bsz, t = qkv.shape[:2]
    q, k, v = torch.split(qkv, [key_heads * key_dim, key_heads * key_dim, value_heads * value_dim], dim=-1)
    return (
        q.reshape(bsz, t, key_heads, key_dim),
        k.reshape(bsz, t, key_heads, key_dim),
        v.reshape(bsz, t, value_heads, value_dim),
    )


def gates(a: torch.Tensor, b: torch.Tensor, a_log: torch.Tensor, dt_bias: torch.Tensor):
    """(g, beta) from the raw per-head logits, fp32: g = -exp(A_log)·softplus(a + dt_bias) (the
    log decay), beta = sigmoid(b)."""
    g = -a_log.float().exp() * torch.nn.functional.softplus(a.float() + dt_bias.float())
    return g, torch.sigmoid(b.float())


@torch.library.custom_op("omni_qwen35::gated_delta_fused", mutates_args=())
def gated_delta_fused(
    qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    a_log: torch.Tensor,
    dt_bias: torch.Tensor,
    key_heads: int,
    key_dim: int,
    value_heads: int,
    value_dim: int,
    state: torch.Tensor | None = None,
) -> torch.Tensor:
    """`gated_delta` over the conv output [B, T, 2·Hk·Dk + Hv·Dv] (q | k | v) and the raw gate
    logits a, b [B, T, Hv]; returns [B, T, Hv, Dv]. The same maths as splitting, gating and
    calling `gated_delta`, which is what torch runs."""
    g, beta = gates(a, b, a_log, dt_bias)
    return gated_delta(*split_qkv(qkv, key_heads, key_dim, value_heads, value_dim), g, beta, state)


@gated_delta_fused.register_fake
def _(qkv, a, b, a_log, dt_bias, key_heads, key_dim, value_heads, value_dim, state=None):
    return qkv.new_empty(qkv.shape[0], qkv.shape[1], value_heads, value_dim)


@torch.library.custom_op("omni_qwen35::gated_delta_state", mutates_args=())
def gated_delta_state(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """`gated_delta` from a zero state, and the state after the last token [B, Hv, Dv, Dk] fp32:
    a shared prompt head's, which its candidates' rows start from (graph.SharedHead)."""
    return recurrence(q, k, v, g, beta)


@gated_delta_state.register_fake
def _(q, k, v, g, beta):
    b, _, hv, dv = v.shape
    return torch.empty_like(v), v.new_empty((b, hv, dv, q.shape[-1]), dtype=torch.float32)


@torch.library.custom_op("omni_qwen35::gated_delta_fused_state", mutates_args=())
def gated_delta_fused_state(
    qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    a_log: torch.Tensor,
    dt_bias: torch.Tensor,
    key_heads: int,
    key_dim: int,
    value_heads: int,
    value_dim: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`gated_delta_fused` from a zero state, and the state after the last token."""
    return gated_delta_state(*split_qkv(qkv, key_heads, key_dim, value_heads, value_dim), *gates(a, b, a_log, dt_bias))


@gated_delta_fused_state.register_fake
def _(qkv, a, b, a_log, dt_bias, key_heads, key_dim, value_heads, value_dim):
    out = qkv.new_empty(qkv.shape[0], qkv.shape[1], value_heads, value_dim)
    return out, qkv.new_empty((qkv.shape[0], value_heads, value_dim, key_dim), dtype=torch.float32)


@torch.library.custom_op("omni_qwen35::causal_conv_silu", mutates_args=())
def causal_conv_silu(x: torch.Tensor, weight: torch.Tensor, state: torch.Tensor | None = None) -> torch.Tensor:
    """silu(causal depthwise conv1d) over [B, T, C] (channels last), weight [C, 1, K], no bias;
    `state` [B, K-1, C]: the K-1 inputs before x (None: zeros). Exported as ORT's fused
    CausalConvWithState: no cuDNN algorithm search per new shape and no transposes around it
    (an exported Conv needs both)."""
    if state is None:
        state = x.new_zeros(x.shape[0], weight.shape[-1] - 1, x.shape[2])
    # K-1 inputs ahead and no padding: exactly T outputs.
    y = torch.nn.functional.conv1d(torch.cat([state.to(x.dtype), x], 1).transpose(1, 2), weight, groups=weight.shape[0])
    return torch.nn.functional.silu(y).transpose(1, 2).contiguous()


@causal_conv_silu.register_fake
def _(x, weight, state=None):
    return torch.empty_like(x)


def conv_translation():
    from models import onnx_ops

    ms, _ = onnx_ops.opsets()

    def causal_conv(x, weight, state=None):
        outputs = ms.CausalConvWithState(x, weight, None, state, activation="silu", channels_last=1, ndim=1, _outputs=2)
        return outputs[0]

    return causal_conv


def _leading(op, x, n: int):
    """The first n dimensions of x's shape, as a 1-D int64 tensor."""
    return op.Slice(op.Shape(x), op.Constant(value_ints=[0]), op.Constant(value_ints=[n]))


def _zero_state(op, like, value_heads: int, value_dim: int, key_dim: int, state=None):
    """GatedDeltaNet's initial state [B, Hv, Dv, Dk]: `state` (the prompt head's) where given,
    else zeros (B from `like`)."""
    if state is not None:
        return state
    shape = op.Concat(_leading(op, like, 1), op.Constant(value_ints=[value_heads, value_dim, key_dim]), axis=0)
    return op.ConstantOfShape(shape)


def translation(with_state: bool = False):
    """The ONNX translation of `gated_delta` (`with_state`: of `gated_delta_state`, which also
    returns the final state): LinearAttention (torch.onnx custom_translation_table)."""
    from onnxscript import opset18 as op

    from models import onnx_ops

    ms, _ = onnx_ops.opsets()

    def linear_attention(q, k, v, g, beta, state=None):
        return linear_attention_state(q, k, v, g, beta, state)[0]

    def linear_attention_state(q, k, v, g, beta, state=None):
        # Packed [B, T, H*D] layout with q/k expanded to the value heads (LinearAttention's GQA
        # shares kv heads among query heads, the opposite of GDN's grouping).
        hk, dk = q.shape[2], q.shape[3]
        hv, dv = v.shape[2], v.shape[3]
        rep = hv // hk
        bt = _leading(op, q, 2)

        def expand(x):
            x = op.Mul(
                x,
                op.Reciprocal(
                    op.Sqrt(
                        op.Add(
                            op.ReduceSum(op.Mul(x, x), op.Constant(value_ints=[-1]), keepdims=1),
                            op.Constant(value_float=EPS),
                        )
                    )
                ),
            )
            x = op.Unsqueeze(x, op.Constant(value_ints=[3]))  # [B, T, Hk, 1, Dk]
            x = op.Expand(x, op.Concat(bt, op.Constant(value_ints=[hk, rep, dk]), axis=0))
            return op.Reshape(x, op.Concat(bt, op.Constant(value_ints=[hv * dk]), axis=0))

        q, k, v32 = (op.Cast(x, to=1) for x in (q, k, v))  # LinearAttention: one dtype, fp32
        packed_v = op.Reshape(v32, op.Concat(bt, op.Constant(value_ints=[hv * dv]), axis=0))
        past = None if state is None else op.Transpose(state, perm=[0, 1, 3, 2])  # K-major here
        out, present = ms.LinearAttention(
            expand(q),
            expand(k),
            packed_v,
            past,
            g,
            beta,
            q_num_heads=hv,
            kv_num_heads=hv,
            update_rule="gated_delta",
            scale=float(dk**-0.5),
            _outputs=2,
        )
        out = op.CastLike(op.Reshape(out, op.Concat(bt, op.Constant(value_ints=[hv, dv]), axis=0)), v)
        return out, op.Transpose(present, perm=[0, 1, 3, 2])  # back to V-major

    return linear_attention if not with_state else linear_attention_state


def fused_translation(with_state: bool = False):
    """The ONNX translation of `gated_delta_fused` (`with_state`: of `gated_delta_fused_state`, its
    second output the final state): one GatedDeltaNet node in its packed form
    (query = the conv output flattened to [B·T, C], key and value absent; the head counts come
    from the state's shape) with gate_activation="qwen" and beta_activation="sigmoid"."""
    from onnxscript import opset18 as op

    from models import onnx_ops

    ms, _ = onnx_ops.opsets()

    def gated_delta_net_fused(qkv, a, b, a_log, dt_bias, key_heads, key_dim, value_heads, value_dim, state=None):
        return fused_state(qkv, a, b, a_log, dt_bias, key_heads, key_dim, value_heads, value_dim, state)[0]

    def gated_delta_net_fused_state(qkv, a, b, a_log, dt_bias, key_heads, key_dim, value_heads, value_dim):
        return fused_state(qkv, a, b, a_log, dt_bias, key_heads, key_dim, value_heads, value_dim)

    def fused_state(qkv, a, b, a_log, dt_bias, key_heads, key_dim, value_heads, value_dim, state=None):
        tokens = op.Constant(value_ints=[-1, 2 * key_heads * key_dim + value_heads * value_dim])
        per_head = op.Constant(value_ints=[-1, value_heads])
        outputs = ms.GatedDeltaNet(
            op.Reshape(qkv, tokens),
            None,
            None,
            None,
            op.Reshape(op.Cast(a, to=1), per_head),
            op.Reshape(op.Cast(b, to=1), per_head),
            _zero_state(op, qkv, value_heads, value_dim, key_dim, state),
            op.Cast(a_log, to=1),
            op.Cast(dt_bias, to=1),
            qk_l2_norm=1,
            update_rule="gated_delta",
            gate_activation="qwen",
            beta_activation="sigmoid",
            _outputs=2,
        )
        out = op.Reshape(
            outputs[0], op.Concat(_leading(op, qkv, 2), op.Constant(value_ints=[value_heads, value_dim]), axis=0)
        )
        return out, outputs[1]

    return gated_delta_net_fused if not with_state else gated_delta_net_fused_state
