"""benchmarks.gpu.weight_fp8: E4M3 weights in blocks or one scale, as ONNX Runtime's FP8 ops read them."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.gpu import weight_fp8 as fp8


def test_blocks_round_each_value_by_at_most_a_sixteenth_of_its_block():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((384, 32)).astype(np.float32) * np.linspace(0.01, 10, 384)[:, None]
    q, scale = fp8.quantize_blocks(w)
    assert q.dtype == fp8.E4M3 and q.shape == (32, 384) and scale.shape == (32, 3)
    assert np.abs(q.astype(np.float32)).max() == fp8.E4M3_MAX  # each block's largest maps to 448
    back = fp8.dequantize(q, scale)
    assert back.shape == w.shape
    # E4M3 keeps 3 mantissa bits: half a step is 1/16 of a value's power of two; below 2^-6 of
    # the block's scale, steps are 2^-9 of it.
    step = np.maximum(np.abs(w) / 16, scale.repeat(128, 1).T * 2.0**-9)
    assert np.all(np.abs(back - w) <= step * 1.0001)


def test_values_on_the_grid_come_back_exactly():
    grid = np.array([0, 0.5, -1, 1.75, 448, -448, 2**-6, 3 * 2**-9], np.float32)
    w = np.tile(grid, 16)[:, None] * np.float32(0.125)  # one block of 128, one column
    q, scale = fp8.quantize_blocks(w)
    assert scale[0, 0] == np.float32(0.125) and np.array_equal(fp8.dequantize(q, scale), w)
    q, s = fp8.quantize_tensor(w)
    assert s == np.float32(0.125) and np.array_equal(fp8.dequantize(q, s, None), w)


def test_activations_saturate_at_the_largest_value():
    x = np.array([1e6, -1e6, 0.3], np.float32)
    assert list(fp8.round_activation(x, 1.0)) == [448.0, -448.0, pytest.approx(0.3125)]


def test_a_width_off_the_block_is_refused():
    with pytest.raises(ValueError, match="multiple of the block size 128"):
        fp8.quantize_blocks(np.ones((100, 4), np.float32))
