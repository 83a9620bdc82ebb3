"""Weight-only block quantization for ONNX Runtime's `com.microsoft.MatMulNBits` (numpy only).

A matrix product's constant weight W [K, N] is stored as `bits`-bit integers, one fp16 scale per
`block` consecutive K values of each output column, with the op's implied zero point
2^(bits-1): W[k, n] ≈ (q[n, k] - 2^(bits-1)) * scale[n, k // block]. The activations stay fp16.

Used by benchmarks/gpu/gemm_probe.py's `nbits` forms. Why it was tried: one Cua-S1 row reads
~7 GB of fp16 weights a pass, and at that size its products are bound by reading them. ONNX
Runtime's CUDA MatMulNBits can run a CUTLASS mixed-input GEMM over such weights
(`ep.cuda.fpa_intb_gemm`); the wheel we serve with is a compact build of it that takes
scale-only weights in blocks of 32 (`FPA_INTB_BLOCK`). On the H200 it was 2.5-2.9x slower than
the fp16 products at Cua-S1's shapes (docs/benchmarks.md, "nbits session"), so no export uses it.
"""
from __future__ import annotations

import numpy as np

BITS = (4, 8)
FPA_INTB_BLOCK = 32


def zero_point(bits: int) -> int:
    return 1 << (bits - 1)


def quantize(w: np.ndarray, bits: int = 8, block: int = FPA_INTB_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """W [K, N] (any float dtype) → (packed uint8 [N, K/block, block*bits/8], fp16 scales [N, K/block]).

    Symmetric per block: the largest |w| of a block maps to 2^(bits-1) - 1, so zero stays exact
    and the code 0 is never used. K must be a multiple of `block` (every Qwen3.5 and ModernBERT
    width is a multiple of 32)."""
    if bits not in BITS:
        raise ValueError("bits must be one of %s, got %r" % (BITS, bits))
    k, n = w.shape
    if k % block:
        raise ValueError("K=%d is not a multiple of the block size %d" % (k, block))
    top = (1 << (bits - 1)) - 1
    blocks = np.asarray(w, dtype=np.float32).T.reshape(n, k // block, block)
    scale = (np.abs(blocks).max(-1) / top).astype(np.float16)
    safe = np.where(scale == 0, np.float16(1), scale).astype(np.float32)
    q = np.clip(np.rint(blocks / safe[..., None]), -top, top).astype(np.int16) + zero_point(bits)
    q = q.astype(np.uint8)
    if bits == 4:   # two codes a byte, the first in the low nibble
        q = q[..., 0::2] | (q[..., 1::2] << 4)
    return np.ascontiguousarray(q), scale


def dequantize(packed: np.ndarray, scale: np.ndarray, bits: int, k: int) -> np.ndarray:
    """The fp32 W [K, N] that `quantize`'s output stands for (what MatMulNBits multiplies by)."""
    q = packed.astype(np.int16)
    if bits == 4:
        q = np.stack([q & 0xF, q >> 4], -1).reshape(q.shape[0], q.shape[1], -1)
    n = q.shape[0]
    w = (q - zero_point(bits)).astype(np.float32) * scale.astype(np.float32)[..., None]
    return w.reshape(n, -1)[:, :k].T


def node_attrs(k: int, n: int, bits: int, block: int = FPA_INTB_BLOCK) -> dict:
    return {"K": k, "N": n, "bits": bits, "block_size": block}
