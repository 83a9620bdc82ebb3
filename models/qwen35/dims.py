"""Backbone dimensions read from a Hugging Face `config.json` (text-only or multimodal)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class TextDims:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    layer_types: tuple[str, ...]  # "linear_attention" | "full_attention", one per layer
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel_dim: int
    rms_norm_eps: float
    rope_theta: float
    partial_rotary_factor: float
    tie_word_embeddings: bool

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def key_dim(self) -> int:
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def value_dim(self) -> int:
        return self.linear_num_value_heads * self.linear_value_head_dim

    @classmethod
    def from_config(cls, config: dict) -> TextDims:
        """`config` is a whole `config.json`; a multimodal one nests the text stack in `text_config`."""
        text = config.get("text_config") or config
        layers = text["num_hidden_layers"]
        types = text.get("layer_types") or [
            "full_attention" if (i + 1) % text.get("full_attention_interval", 4) == 0 else "linear_attention"
            for i in range(layers)
        ]
        rope = text.get("rope_parameters") or text.get("rope_scaling") or {}
        tied = config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))
        return cls(
            vocab_size=text["vocab_size"],
            hidden_size=text["hidden_size"],
            intermediate_size=text["intermediate_size"],
            layer_types=tuple(types[:layers]),
            num_attention_heads=text["num_attention_heads"],
            num_key_value_heads=text["num_key_value_heads"],
            head_dim=text.get("head_dim", 256),
            linear_num_key_heads=text["linear_num_key_heads"],
            linear_num_value_heads=text["linear_num_value_heads"],
            linear_key_head_dim=text["linear_key_head_dim"],
            linear_value_head_dim=text["linear_value_head_dim"],
            linear_conv_kernel_dim=text.get("linear_conv_kernel_dim", 4),
            rms_norm_eps=text.get("rms_norm_eps", 1e-6),
            rope_theta=rope.get("rope_theta", text.get("rope_theta", 10_000_000.0)),
            partial_rotary_factor=rope.get("partial_rotary_factor", text.get("partial_rotary_factor", 0.25)),
            tie_word_embeddings=bool(tied),
        )

    @classmethod
    def from_dir(cls, directory: str) -> TextDims:
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as f:
            return cls.from_config(json.load(f))

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}
