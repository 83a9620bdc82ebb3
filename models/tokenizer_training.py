"""Train small byte-level BPE tokenizers locally, for random-weight test and demo checkpoints.

No tokenizer can be downloaded where tests and the demo run, so checkpoints built here carry a
tokenizer trained on a fixed in-repo corpus, saved in the Hugging Face layout
(`tokenizer.json` + `tokenizer_config.json`) that both `tokenizers` and transformers load.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence

_CORPUS = [
    "I was charged twice for my order. Please refund the duplicate today.",
    "The application crashes when I open the settings page on my phone.",
    "Which team should handle this? Charges and refunds. Software problems.",
    "How urgent is the request? Not urgent. Needs attention soon. Needs attention immediately.",
    "Does the customer ask for a refund? yes, the statement holds. no, the statement does not hold.",
    "choice question: score question: noul question: level 0: level 1: level 2: false: true:",
    "Der Kunde möchte eine Rückerstattung. Le client demande un remboursement rapide.",
    "El pedido llegó tarde y dañado. 注文が二重に請求されました。 Заказ не пришёл вовремя.",
    '{"user": "alice", "turns": [{"role": "user", "text": "hello"}], "amount": 12.5, "ok": true}',
    "Security incident: credential compromise suspected after a phishing email on Monday.",
    "Invoice 4471 does not match the purchase order; the amount differs by 1e-05 percent.",
    "The quick brown fox jumps over the lazy dog 0123456789 times, again and again.",
    "Accessibility tree: button 'Submit' focused; link 'Cancel'; textbox 'Email' empty.",
    "You are a one-pass decision model. Answer with a single letter. Options: A B C D E F.",
]


def corpus(repeat: int = 40) -> list[str]:
    """The fixed training text: varied enough that ordinary prompts split into real merges."""
    lines = []
    for i in range(repeat):
        for line in _CORPUS:
            lines.append(line if i % 2 == 0 else line.lower())
    return lines


def train_bpe(
    special_tokens: Sequence[str],
    vocab_size: int = 1200,
    texts: Iterable[str] | None = None,
):
    """A byte-level BPE tokenizer whose first ids are `special_tokens`, in order."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts) if texts is not None else corpus(), trainer=trainer)
    return tok


def save_hf_tokenizer(tok, directory: str, special: dict[str, str], model_max_length: int) -> None:
    """Write `tokenizer.json` and a `tokenizer_config.json` naming the special tokens."""
    os.makedirs(directory, exist_ok=True)
    tok.save(os.path.join(directory, "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": False,
        **special,
    }
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
