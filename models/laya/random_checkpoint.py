"""Random-weight Laya checkpoints in the published layout (export-time only: needs torch).

Used by the tests, by `make serve`'s demo and by the GPU benchmarks. The layout is the one
`convaiinnovations/laya` publishes: `rl_agent_config.json`, `encoder/config.json`,
`model.safetensors` (fp16, with the fp32 `temperature` buffer) and `tokenizer/`. The tokenizer
is trained locally (no downloads), with the variant's special-token strings.

    python -m models.laya.random_checkpoint OUT --variant english --size tiny
"""

from __future__ import annotations

import argparse
import json
import os

from models.tokenizer_training import save_hf_tokenizer, train_bpe

# Encoder dims per (variant, size); "full" is the published size (models.md §2.2).
_DIMS = {
    "tiny": dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=1, intermediate_size=96),
    "demo": dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=2, intermediate_size=192),
    "full-english": dict(
        hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, intermediate_size=2624, vocab_size=50368
    ),
    "full-multilingual": dict(
        hidden_size=768, num_hidden_layers=22, num_attention_heads=12, intermediate_size=1152, vocab_size=256000
    ),
}

# Special-token strings: ModernBERT's for english/typed-decisions, Gemma-style for mmBERT.
_SPECIALS = {
    "english": ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"],
    "multilingual": ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"],
}
_SPECIAL_ROLES = {
    "english": {
        "unk_token": "[UNK]",
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "pad_token": "[PAD]",
        "mask_token": "[MASK]",
    },
    "multilingual": {
        "unk_token": "<unk>",
        "cls_token": "<bos>",
        "sep_token": "<eos>",
        "pad_token": "<pad>",
        "mask_token": "<mask>",
        "bos_token": "<bos>",
        "eos_token": "<eos>",
    },
}
# Published calibration (english from a third-party mirror, models.md §2.1); `choice:11+` is
# deliberately below the clamp so the loader's clamp path is exercised.
_TEMPERATURES = {
    "english": (
        [1.6369, 1.2514, 1.9834],
        {
            "choice:2": 1.9064,
            "choice:3-5": 1.7602,
            "choice:6-10": 1.0,
            "choice:11+": 0.1006,
            "score:3-5": 1.2514,
            "noul:2": 1.9834,
        },
    ),
    "multilingual": ([1.0, 1.0, 1.0], {}),
}
_LENGTHS = {"english": (512, 192), "multilingual": (1024, 256), "typed-decisions": (1024, 256)}


def build(out: str, variant: str = "english", size: str = "tiny", seed: int = 0) -> str:
    """Write a random-weight checkpoint of `variant` at `size` into `out`; returns `out`."""
    import torch
    from safetensors.torch import save_file

    from models.laya.graph import LayaDecisionGraph, build_encoder, scale_like_trained

    family = "multilingual" if variant == "multilingual" else "english"
    specials = _SPECIALS[family]
    tok = train_bpe(specials, vocab_size=1200)
    ids = {tok.id_to_token(i): i for i in range(len(specials))}
    roles = _SPECIAL_ROLES[family]
    dims = dict(_DIMS["full-" + family] if size == "full" else _DIMS[size])
    dims.setdefault("vocab_size", tok.get_vocab_size())
    max_len, head_max_len = _LENGTHS[variant]
    theta_local = 160000.0 if family == "multilingual" else 10000.0
    encoder_config = {
        "architectures": ["ModernBertModel"],
        "model_type": "modernbert",
        **dims,
        "hidden_activation": "gelu",
        "max_position_embeddings": 8192,
        "norm_eps": 1e-5,
        "norm_bias": False,
        "local_attention": 128,
        "global_attn_every_n_layers": 3,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 160000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": theta_local},
        },
        "pad_token_id": ids[roles["pad_token"]],
        "cls_token_id": ids[roles["cls_token"]],
        "sep_token_id": ids[roles["sep_token"]],
        "bos_token_id": ids[roles["cls_token"]],
        "eos_token_id": ids[roles["sep_token"]],
    }
    temperature, by_options = _TEMPERATURES[family]
    agent_config = {
        # The published configs name a Kaggle path here; loaders build from encoder/config.json.
        "encoder": "/kaggle/input/modernbert-large" if family == "english" else "jhu-clsp/mmBERT-base",
        "head_layers": 2,
        "act_costs": {"escalate": 0.5},
        "max_len": max_len,
        "head_max_len": head_max_len,
        "amp_dtype": "bf16",
        "temperature": temperature,
        "temperature_by_options": by_options,
        "random_weights": True,
    }

    torch.manual_seed(seed)
    model = LayaDecisionGraph(build_encoder(encoder_config), agent_config["head_layers"], 2)
    scale_like_trained(model, seed)
    state = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    state["temperature"] = torch.tensor(temperature, dtype=torch.float32)

    os.makedirs(os.path.join(out, "encoder"), exist_ok=True)
    with open(os.path.join(out, "encoder", "config.json"), "w") as f:
        json.dump(encoder_config, f, indent=2)
    with open(os.path.join(out, "rl_agent_config.json"), "w") as f:
        json.dump(agent_config, f, indent=2)
    save_file(state, os.path.join(out, "model.safetensors"))
    save_hf_tokenizer(tok, os.path.join(out, "tokenizer"), roles, max_len)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--variant", default="english", choices=sorted(_LENGTHS))
    ap.add_argument("--size", default="tiny", choices=["tiny", "demo", "full"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(build(args.out, args.variant, args.size, args.seed))


if __name__ == "__main__":
    main()
