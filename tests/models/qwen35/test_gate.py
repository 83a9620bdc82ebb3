"""The Qwen3.5 half-precision parity gate (models/qwen35/gate.py): its float32 reference is the
module's own maths streamed layer by layer, it passes a tiny fp16 export on ONNX Runtime's CPU
provider, and under `enforce` it refuses a graph whose distributions move."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models import precision
from models.qwen35 import export, gate, weights
from models.qwen35.dims import TextDims


@pytest.fixture(scope="module")
def tied(qwen_tied):
    dims = TextDims.from_dir(qwen_tied)
    return dims, weights.load_text_state(qwen_tied, torch.float32)


@pytest.fixture(scope="module")
def half_export(tied, tmp_path_factory):
    """(fp16 module, its ONNX path, the 26 letter rows) of the tiny tied checkpoint."""
    dims, state = tied
    module = export.build_module(dims, state, "last", "float16")
    path = export.export_graph(module, str(tmp_path_factory.mktemp("gate-fp16")), progress=lambda m: None)
    return module, path, state["embed_tokens.weight"][32:58].numpy()


def test_streamed_reference_is_the_module_forward(tied):
    """One float32 layer at a time gives the whole float32 module's final hidden states."""
    dims, state = tied
    module = export.build_module(dims, state, "last", "float32", attention="sdpa")
    rows = gate.prompts(dims.vocab_size, n=3, lo=9, hi=140, seed=4)
    streamed = gate.reference_hidden(module, rows)
    for r, got in zip(rows, streamed):
        with torch.no_grad():
            want = module.hidden_states(torch.from_numpy(r))[0].double().numpy()
        assert got.shape == (r.shape[1], dims.hidden_size)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_reference_of_a_half_module_computes_in_float32(tied, half_export):
    """From the fp16 module's weights, the reference is the float32 maths (within the weights'
    fp16 rounding), not the fp16 module's own forward."""
    dims, state = tied
    half = half_export[0]
    ref32 = export.build_module(dims, state, "last", "float32", attention="sdpa")
    (r,) = gate.prompts(dims.vocab_size, n=1, lo=120, hi=120, seed=5)
    (streamed,) = gate.reference_hidden(half, [r])
    with torch.no_grad():
        full = ref32.hidden_states(torch.from_numpy(r))[0].double().numpy()
        own = half.hidden_states(torch.from_numpy(r))[0].double().numpy()
    assert streamed.dtype == np.float64
    err_ref = np.linalg.norm(streamed - full) / np.linalg.norm(full)
    err_own = np.linalg.norm(own - full) / np.linalg.norm(full)
    assert err_ref < 5e-3 and err_ref < err_own / 2, (err_ref, err_own)


def test_a_tiny_fp16_export_passes_on_the_cpu(half_export):
    module, path, letters = half_export
    result = gate.run(
        module, path, gate.letter_distributions(letters), kernel="linear_attention", progress=lambda m: None
    )
    assert result["passes"] and result["mode"] == "enforce"
    assert result["device"] == "cpu" and result["reference_device"] == "cpu"
    assert result["rows"] == gate.PROMPTS and len(result["prompt_tokens"]) == gate.PROMPTS
    assert all(gate.MIN_TOKENS <= t <= gate.MAX_TOKENS for t in result["prompt_tokens"])
    assert 0 < result["max_prob_drift"] <= precision.MAX_DRIFT  # a different graph, within the gate
    assert 0 < result["final_hidden_rel_err"] < 0.05
    assert "gdn_plan" not in result  # no GatedDeltaNet kernel ran


@pytest.mark.slow
def test_enforce_refuses_what_record_keeps(half_export, monkeypatch):
    """The same export against a drift limit below its measured drift (1e-4)."""
    module, path, letters = half_export
    monkeypatch.setattr(precision, "MAX_DRIFT", 1e-4)
    dists = gate.letter_distributions(letters)
    with pytest.raises(precision.GateFailed, match="fails the parity gate .*limit 0.0001.*--parity-gate record"):
        gate.run(module, path, dists, kernel="linear_attention", progress=lambda m: None)
    kept = gate.run(module, path, dists, kernel="linear_attention", mode="record", progress=lambda m: None)
    assert not kept["passes"] and kept["mode"] == "record" and kept["max_prob_drift"] > 1e-4


def test_noul_distributions_are_open_jev_calibration():
    from models.open_jev import finish

    rng = np.random.default_rng(0)
    w, h = rng.normal(size=16), rng.normal(size=(3, 16))
    dists = gate.noul_distributions(w, 0.25, 2.5)(h)
    for row, p in zip(h, dists):
        score = finish.head_scores(row[None], w.astype(np.float32), 0.25)[0]
        np.testing.assert_allclose(p, finish.calibrate([0.0, score], 2.5), atol=1e-6)


def test_a_cuda_provider_that_fails_is_named_in_the_record_and_the_log(half_export, monkeypatch):
    """onnxruntime lists CUDA but it does not take the graph (here: the CPU build, asked for a
    provider it lacks, falls back as a GPU build without a driver does). The gate runs on the CPU,
    and its record and log line say that CUDA did not run it, which understates CUDA's drift."""
    monkeypatch.setattr(precision, "cuda_listed", lambda: True)
    module, path, letters = half_export
    result = gate.run(
        module, path, gate.letter_distributions(letters), kernel="linear_attention", progress=lambda m: None
    )
    assert result["device"] == "cpu" and result["passes"]
    assert "CUDA provider did not initialise" in result["cuda_failed"]
    line = precision.summary(result)
    assert line.startswith("parity gate vs float32 on cpu") and "WARNING: gated on the CPU" in line
    monkeypatch.setattr(precision, "cuda_listed", lambda: False)  # a CPU-only machine: nothing to say
    plain = gate.run(
        module, path, gate.letter_distributions(letters), kernel="linear_attention", progress=lambda m: None
    )
    assert "cuda_failed" not in plain and "WARNING" not in precision.summary(plain)


def test_options_the_gate_cannot_honour_fail_before_the_export(monkeypatch):
    monkeypatch.setattr(precision, "cuda_listed", lambda: False)
    gate.check_options("float32", "gated_delta_net_fused", "enforce")  # fp32: no gate
    gate.check_options("float16", "linear_attention", "record")
    with pytest.raises(
        precision.GateUnavailable,
        match="cannot run here: --gdn-kernel gated_delta_net_fused runs on CUDA only.*no CUDA provider",
    ):
        gate.check_options("float16", "gated_delta_net_fused", "enforce")
    gate.check_options("float16", "gated_delta_net_fused", "record")  # exported, its gate not run
    with pytest.raises(ValueError, match="parity_gate"):
        gate.check_options("float16", "linear_attention", "warn")
    with pytest.raises(ValueError, match="unknown GDN kernel 'gated_delta_net'"):
        gate.check_options("float16", "gated_delta_net", "enforce")


def test_a_gate_that_cannot_run_here_is_refused_or_recorded_as_not_run(tied, monkeypatch):
    """A bfloat16 graph on a machine without CUDA: ONNX Runtime's CPU provider has no bfloat16
    matrix products. enforce refuses before the export; record exports and says so."""
    monkeypatch.setattr(precision, "cuda_listed", lambda: False)
    dims, state = tied
    module = export.build_module(dims, state, "last", "bfloat16")
    with pytest.raises(RuntimeError, match="bfloat16 export's parity gate cannot run here: .*no bfloat16 kernels"):
        gate.check_options("bfloat16", "linear_attention", "enforce")
    gate.check_options("bfloat16", "linear_attention", "record")
    dists = gate.letter_distributions(np.ones((26, dims.hidden_size)))
    kept = gate.run(
        module, "never-opened.onnx", dists, kernel="linear_attention", mode="record", progress=lambda m: None
    )
    assert not kept["passes"] and "no bfloat16 kernels" in kept["not_run"] and kept["mode"] == "record"
    assert precision.summary(kept).startswith("parity gate NOT RUN (recorded)")
    with pytest.raises(precision.GateFailed, match="could not run"):
        gate.run(module, "never-opened.onnx", dists, kernel="linear_attention", progress=lambda m: None)


def test_spend_frees_the_module_once_its_reference_has_run(tied, half_export):
    """What the exporters ask for: the gate's session then loads beside no second copy of the weights."""
    dims, state = tied
    module = export.build_module(dims, state, "last", "float16")  # the export's module, again
    result = gate.run(
        module,
        half_export[1],
        gate.letter_distributions(half_export[2]),
        kernel="linear_attention",
        spend=True,
        progress=lambda m: None,
    )
    assert result["passes"] and result["rows"] == gate.PROMPTS
    assert all(t.numel() == 0 for t in list(module.parameters()) + list(module.buffers()))


def test_feeds_for_a_graph_that_takes_a_prompt_head_per_pass():
    """gate.feeds: rows read at their last token; a shared-head graph gets the first row's first
    half as the head and every row's second half after it (the gate's and the GPU benches' feeds)."""
    import numpy as np

    from models.qwen35 import gate

    ids = np.arange(2 * 9, dtype=np.int64).reshape(2, 9)
    plain = gate.feeds(ids)
    assert set(plain) == {"input_ids", "positions"} and plain["positions"].tolist() == [8, 8]
    shared = gate.feeds(ids, shared=True)
    assert shared["head_ids"].tolist() == [ids[0, :4].tolist()]
    assert shared["input_ids"].tolist() == ids[:, 4:].tolist() and shared["positions"].tolist() == [4, 4]
    two = gate.feeds(ids[:1, :2], shared=True)
    assert two["head_ids"].tolist() == [[0]] and two["input_ids"].tolist() == [[1]] and two["positions"].tolist() == [0]
    with pytest.raises(ValueError, match="2 tokens or more"):
        gate.feeds(ids[:1, :1], shared=True)
