"""FP8 (E4M3) weights and activations for ONNX Runtime's FP8 products (numpy and ml_dtypes only).

Used by benchmarks/gpu/gemm_probe.py's FP8 forms, to learn whether ONNX Runtime can run a Qwen3.5
product faster over FP8 than over fp16 on the H200 (Hopper runs FP8 tensor-core products at twice
fp16's rate and reads half the bytes a weight):
- `com.microsoft.MatMulBlockQuantizedFp8Weight`: the weight [N, K] in E4M3 with one fp32 scale
  per row and `block` consecutive K values; an optional scalar `a_scale` rounds the activation
  through E4M3 too (W8A8); otherwise the activation stays fp16 (W8A16).
- `com.microsoft.GemmFloat8` (cuBLASLt): both operands E4M3, one fp32 scale each; the activation
  is cast by a `QuantizeLinear` ahead of it.

E4M3 keeps 3 mantissa bits: a value rounds by up to 1/16 of itself, so these are probes of speed
first; each product's error against numpy is reported beside its time.

On the H200 (docs/benchmarks.md, "What limits each model") GemmFloat8 takes Cua-S1's one-row
products from 2.90 to 2.10 ms and Open-Jev-27B's at 2,048 rows from 127.8 to 74.8; the
weight-only op dequantizes to fp16 first at these row counts and is 2x slower. A whole Cua-S1
graph of GemmFloat8 products runs 5.8 ms of GPU time a one-row pass against 6.4, but ONNX Runtime
1.31.1 does not capture it as a CUDA graph (its GemmFloat8 allocates and frees a 32 MB workspace
on every call) and runs it uncaptured in 39 ms, so no export uses FP8 yet.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

E4M3 = ml_dtypes.float8_e4m3fn
E4M3_MAX = 448.0
BLOCK = 128


def _e4m3(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -E4M3_MAX, E4M3_MAX).astype(E4M3)


def quantize_blocks(w: np.ndarray, block: int = BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """W [K, N] → (E4M3 [N, K], fp32 scales [N, K/block]): each block's largest |w| maps to 448."""
    k, n = w.shape
    if k % block:
        raise ValueError("K=%d is not a multiple of the block size %d" % (k, block))
    blocks = np.asarray(w, dtype=np.float32).T.reshape(n, k // block, block)
    scale = np.abs(blocks).max(-1) / E4M3_MAX
    scale = np.where(scale == 0, np.float32(1), scale).astype(np.float32)
    return _e4m3(blocks / scale[..., None]).reshape(n, k), scale


def quantize_tensor(w: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """W [K, N] → (E4M3 [N, K], one fp32 scale): the largest |w| maps to 448."""
    w = np.asarray(w, dtype=np.float32)
    scale = np.float32(np.abs(w).max() / E4M3_MAX or 1.0)
    return _e4m3(w.T / scale), scale


def dequantize(q: np.ndarray, scale, block: int | None = BLOCK) -> np.ndarray:
    """The fp32 W [K, N] an E4M3 [N, K] weight stands for (`block` None: one scale)."""
    w = q.astype(np.float32)
    if block is not None:
        n, k = w.shape
        w = (w.reshape(n, k // block, block) * np.asarray(scale, np.float32)[..., None]).reshape(n, k)
    else:
        w = w * np.float32(scale)
    return w.T


def round_activation(x: np.ndarray, scale: float) -> np.ndarray:
    """fp8_e4m3(x / scale) * scale in fp32: what a W8A8 product multiplies the activation as."""
    return _e4m3(np.asarray(x, np.float32) / np.float32(scale)).astype(np.float32) * np.float32(scale)


def initializer(name: str, q: np.ndarray):
    """An ONNX FLOAT8E4M3FN initializer holding `q`'s bytes."""
    from onnx import TensorProto, helper

    return helper.make_tensor(name, TensorProto.FLOAT8E4M3FN, list(q.shape), q.view(np.uint8).tobytes(), raw=True)
