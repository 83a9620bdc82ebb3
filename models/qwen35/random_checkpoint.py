"""Random-weight Qwen3.5 checkpoints in the Hugging Face layout (export-time only: needs torch).

`tiny` checkpoints are built and saved by transformers itself (`Qwen3_5ForConditionalGeneration`
with a tiny vision tower, or text-only `Qwen3_5ForCausalLM`), so tests read the real layout.
Full-size ones (`4b`, `9b`, `27b`: models.md §6.1 dims) are written tensor by tensor in 5 GB
BF16 shards without building a torch model, so writing one holds one tensor in memory at a time.
`--described` writes no shards at all, only `random_weights.json` (seed and dims): the exporter
draws the same BF16 tensors as it loads them (`described_state`), so an export fits a disk that
could not also hold the checkpoint's shards. transformers cannot read such a directory: the HF
baselines need the written form. Every checkpoint carries a locally trained
Qwen-style tokenizer (tokenizer_build).

    python -m models.qwen35.random_checkpoint OUT --size 4b [--described]
"""

from __future__ import annotations

import argparse
import json
import os

from models.qwen35 import tokenizer_build

_FULL = {
    "4b": dict(
        hidden_size=2560,
        intermediate_size=9216,
        num_hidden_layers=32,
        num_attention_heads=16,
        num_key_value_heads=4,
        linear_num_value_heads=32,
        tie_word_embeddings=True,
    ),
    "9b": dict(
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=32,
        num_attention_heads=16,
        num_key_value_heads=4,
        linear_num_value_heads=32,
        tie_word_embeddings=False,
    ),
    "27b": dict(
        hidden_size=5120,
        intermediate_size=17408,
        num_hidden_layers=64,
        num_attention_heads=24,
        num_key_value_heads=4,
        linear_num_value_heads=48,
        tie_word_embeddings=False,
    ),
}
_COMMON_FULL = dict(
    vocab_size=248320,
    head_dim=256,
    linear_num_key_heads=16,
    linear_key_head_dim=128,
    linear_value_head_dim=128,
    linear_conv_kernel_dim=4,
    rms_norm_eps=1e-6,
    rope_parameters={
        "rope_type": "default",
        "rope_theta": 10_000_000.0,
        "partial_rotary_factor": 0.25,
        "mrope_section": [11, 11, 10],
        "mrope_interleaved": True,
    },
)


FULL_SIZES = tuple(_FULL)


def full_text_config(size: str) -> dict:
    """The text config of a full-size model ("4b", "9b", "27b"), as `build` writes it (the published tying)."""
    return dict(_COMMON_FULL, **_FULL[size])


def tiny_text_config(vocab_size: int, tied: bool, layers: int = 4) -> dict:
    """Both layer kinds (3 GDN + 1 full attention per 4), GQA on both sides, small heads."""
    return dict(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_conv_kernel_dim=4,
        rms_norm_eps=1e-6,
        tie_word_embeddings=tied,
        max_position_embeddings=32768,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10_000_000.0,
            "partial_rotary_factor": 0.25,
            "mrope_section": [2, 1, 1],
            "mrope_interleaved": True,
        },
    )


def text_keys(text: dict, prefix: str):
    """(name, shape) of every text-stack tensor, named as transformers saves them."""
    h, v = text["hidden_size"], text["vocab_size"]
    kd = text["linear_num_key_heads"] * text["linear_key_head_dim"]
    vd = text["linear_num_value_heads"] * text["linear_value_head_dim"]
    hv, k = text["linear_num_value_heads"], text["linear_conv_kernel_dim"]
    qh, kvh, hd = text["num_attention_heads"], text["num_key_value_heads"], text["head_dim"]
    ffn = text["intermediate_size"]
    yield prefix + "embed_tokens.weight", (v, h)
    for i in range(text["num_hidden_layers"]):
        p = "%slayers.%d." % (prefix, i)
        if (i + 1) % 4:
            a = p + "linear_attn."
            yield from [
                (a + "dt_bias", (hv,)),
                (a + "A_log", (hv,)),
                (a + "conv1d.weight", (2 * kd + vd, 1, k)),
                (a + "norm.weight", (text["linear_value_head_dim"],)),
                (a + "out_proj.weight", (h, vd)),
                (a + "in_proj_qkv.weight", (2 * kd + vd, h)),
                (a + "in_proj_z.weight", (vd, h)),
                (a + "in_proj_b.weight", (hv, h)),
                (a + "in_proj_a.weight", (hv, h)),
            ]
        else:
            a = p + "self_attn."
            yield from [
                (a + "q_proj.weight", (qh * hd * 2, h)),
                (a + "k_proj.weight", (kvh * hd, h)),
                (a + "v_proj.weight", (kvh * hd, h)),
                (a + "o_proj.weight", (h, qh * hd)),
                (a + "q_norm.weight", (hd,)),
                (a + "k_norm.weight", (hd,)),
            ]
        yield from [
            (p + "mlp.gate_proj.weight", (ffn, h)),
            (p + "mlp.up_proj.weight", (ffn, h)),
            (p + "mlp.down_proj.weight", (h, ffn)),
            (p + "input_layernorm.weight", (h,)),
            (p + "post_attention_layernorm.weight", (h,)),
        ]
    yield prefix + "norm.weight", (h,)


def _random(name: str, shape, gen, device):
    """Values shaped like a trained model's: norms near 0 (they scale by 1 + w), decays in range."""
    import torch

    if name.endswith("A_log"):
        return torch.empty(shape, device=device).uniform_(0.0, 2.7, generator=gen).float()
    if name.endswith("dt_bias"):
        return torch.ones(shape, device=device)
    if name.endswith("norm.weight"):
        # The GDN output norm multiplies by w itself (no +1); the zero-centred ones use 1 + w.
        base = 1.0 if ".linear_attn.norm." in name else 0.0
        return base + 0.1 * torch.randn(shape, device=device, generator=gen)
    if name.endswith("embed_tokens.weight") or name == "lm_head.weight":
        return 0.3 * torch.randn(shape, device=device, generator=gen)
    fan_in = shape[-1] if len(shape) == 2 else shape[-1] * shape[-2]
    return torch.randn(shape, device=device, generator=gen) * (0.8 / fan_in**0.5)


def build(
    out: str,
    size: str = "tiny",
    tied: bool | None = None,
    layout: str = "conditional",
    seed: int = 0,
    layers: int = 4,
    described: bool = False,
) -> str:
    """Write a random checkpoint; `layout` is "conditional" (multimodal, as published) or "causal_lm";
    `described` (full sizes only): the weights' description instead of their shards."""
    os.makedirs(out, exist_ok=True)
    tok = tokenizer_build.save(out, prompts=size != "tiny")
    if size == "tiny":
        text = tiny_text_config(tok.get_vocab_size(), bool(tied), layers)
        _build_tiny(out, text, layout, seed)
    else:
        text = full_text_config(size)
        if tied is not None:
            text["tie_word_embeddings"] = tied
        if described:
            describe(out, text, seed)
        else:
            _write_full(out, text, seed, _device())
    return out


def _device():
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _build_tiny(out: str, text: dict, layout: str, seed: int) -> None:
    import torch
    from transformers import Qwen3_5Config, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration, Qwen3_5TextConfig

    torch.manual_seed(seed)
    if layout == "conditional":
        config = Qwen3_5Config(
            text_config=text,
            tie_word_embeddings=text["tie_word_embeddings"],
            vision_config=dict(
                depth=1, hidden_size=32, intermediate_size=32, num_heads=2, out_hidden_size=text["hidden_size"]
            ),
        )
        model = Qwen3_5ForConditionalGeneration(config)
    else:
        model = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**text))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "visual" not in name:
                param.copy_(_random(name, tuple(param.shape), gen, "cpu"))
    model.to(torch.bfloat16).save_pretrained(out)
    path = os.path.join(out, "config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    config["random_weights"] = True  # exports and responses say so
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)


def _full_keys(text: dict) -> list:
    keys = list(text_keys(text, "model.language_model."))
    if not text["tie_word_embeddings"]:
        keys.append(("lm_head.weight", (text["vocab_size"], text["hidden_size"])))
    return keys


def _full_tensors(text: dict, seed: int, device, only=None):
    """(checkpoint key, BF16 CPU tensor) in the one order both forms draw them; with `only`, the
    others are still drawn (the generator's sequence goes through them) but not kept."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    for name, shape in _full_keys(text):
        t = _random(name, shape, gen, device)
        if only is None or name in only:
            yield name, t.to(torch.bfloat16).cpu()


def _write_config(out: str, text: dict) -> None:
    config = {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "tie_word_embeddings": text["tie_word_embeddings"],
        "text_config": dict(text, model_type="qwen3_5_text"),
        "random_weights": True,
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


def _write_full(out: str, text: dict, seed: int, device) -> None:
    from safetensors.torch import save_file

    keys = _full_keys(text)
    shard, current, size, index = 0, {}, 0, {}
    for i, (name, t) in enumerate(_full_tensors(text, seed, device)):
        current[name] = t
        size += t.numel() * 2
        if size >= 5_000_000_000 or i == len(keys) - 1:  # 5 GB shards, as save_pretrained
            shard += 1
            filename = "model-%05d.safetensors" % shard
            save_file(current, os.path.join(out, filename), metadata={"format": "pt"})
            index.update(dict.fromkeys(current, filename))
            current, size = {}, 0
            print("random checkpoint: shard %d written (%d/%d tensors)" % (shard, i + 1, len(keys)), flush=True)
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": index}, f)
    _write_config(out, text)


DESCRIBED = "random_weights.json"


def describe(out: str, text: dict, seed: int, device=None) -> None:
    """A full-size checkpoint as its description: config, tokenizer and DESCRIBED, no shards.
    It names the generator's device kind: CUDA and the CPU draw different numbers from one seed."""
    os.makedirs(out, exist_ok=True)
    generator = (device or _device()).type
    with open(os.path.join(out, DESCRIBED), "w") as f:
        json.dump({"format": "omni-random-v1", "seed": seed, "generator": generator, "text_config": text}, f, indent=2)
    _write_config(out, text)
    print("random checkpoint: described (%d tensors drawn as they load)" % len(_full_keys(text)), flush=True)


def described_state(directory: str, dtype=None, only=None) -> dict | None:
    """A described checkpoint's tensors, keyed by checkpoint name as its shards would hold them
    (bit for bit what `_write_full` writes for the same seed on the same device kind), cast to
    `dtype`, only the names in `only` when given; None when `directory` holds no description."""
    import torch

    path = os.path.join(directory, DESCRIBED)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    if spec.get("format") != "omni-random-v1":
        raise ValueError("%s: unknown format %r" % (path, spec.get("format")))
    generator = spec.get("generator")
    if generator not in ("cpu", "cuda"):
        raise ValueError("%s: unknown generator %r (cpu or cuda)" % (path, generator))
    if generator == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "%s was described on a CUDA machine: its weights are drawn on CUDA, and this machine has none" % path
        )
    return {
        name: t.to(dtype) if dtype is not None else t
        for name, t in _full_tensors(spec["text_config"], int(spec["seed"]), torch.device(generator), only)
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--size", default="tiny", choices=["tiny", *_FULL])
    ap.add_argument("--tied", action=argparse.BooleanOptionalAction, default=None)
    ap.add_argument("--layout", default="conditional", choices=["conditional", "causal_lm"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--described",
        action="store_true",
        help="full sizes: write the weights' description, drawn as the exporter loads them",
    )
    args = ap.parse_args(argv)
    if args.described and args.size == "tiny":
        ap.error("--described is for the full sizes")
    print(build(args.out, args.size, args.tied, args.layout, args.seed, described=args.described))


if __name__ == "__main__":
    main()
