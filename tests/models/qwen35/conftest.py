"""Tiny random Qwen3.5 checkpoints (both layer kinds; tied and untied; multimodal and text-only
layouts) built with transformers in the test session, and their ONNX exports."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def qwen_tied(artifacts):
    """Published multimodal layout (`model.language_model.*` + vision tower), tied embeddings."""
    from models.qwen35 import random_checkpoint

    return random_checkpoint.build(str(artifacts / "qwen-tied"), "tiny", tied=True, layout="conditional", seed=1)


@pytest.fixture(scope="session")
def qwen_untied(artifacts):
    """Text-only `save_pretrained` layout (`model.*` + `lm_head`), untied, 8 layers."""
    from models.qwen35 import random_checkpoint

    return random_checkpoint.build(
        str(artifacts / "qwen-untied"), "tiny", tied=False, layout="causal_lm", seed=2, layers=8
    )


def reference(directory: str):
    """transformers' own text model for a checkpoint, fp32 (the parity reference)."""
    import torch
    from transformers import AutoConfig, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration

    config = AutoConfig.from_pretrained(directory)
    cls = Qwen3_5ForConditionalGeneration if config.model_type == "qwen3_5" else Qwen3_5ForCausalLM
    model = cls.from_pretrained(directory, dtype=torch.float32).eval()
    return model


@pytest.fixture(scope="session", params=["sdpa", "gqa"])
def tied_letters_export(request, qwen_tied, artifacts):
    """(module, onnx path) for the tied checkpoint with the Cua-S1 letter readout, with the traced
    attention and with ONNX Runtime's GroupQueryAttention kernel."""
    import torch

    from models.qwen35 import export, weights
    from models.qwen35.dims import TextDims

    dims = TextDims.from_dir(qwen_tied)
    module = export.build_module(
        dims,
        weights.load_text_state(qwen_tied, torch.float32),
        "letters",
        letter_ids=list(range(32, 58)),
        attention=request.param,
    )
    assert module.attention == request.param
    out = artifacts / ("qwen-tied-onnx-" + request.param)
    out.mkdir()
    return module, export.export_graph(module, str(out), progress=lambda m: None)
