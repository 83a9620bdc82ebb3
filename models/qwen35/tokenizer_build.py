"""A small Qwen-style byte-level BPE tokenizer, trained locally for random-weight checkpoints.

It keeps what the decision models rely on: ids 0-255 are the byte alphabet in GPT-2 order, so
the letters A-Z are the single tokens 32-57 (Cua-S1 reads those logits), and the chat special
tokens (`<|im_start|>`, `<|im_end|>`, `<think>`, `</think>`, `<|endoftext|>`) are whole tokens
that request text spelling them also becomes, as with the real tokenizer.
"""

from __future__ import annotations

from models.tokenizer_training import corpus, save_hf_tokenizer

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
# Qwen2-family pre-tokenizer split (contractions, words, single digits, punctuation, spaces).
_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_EXTRA_TEXT = [
    "Context:\nQuestion: Proposed answer: Is this proposed answer correct? Answer Yes or No.",
    "Is the answer to this question yes? Answer Yes or No.\nYes means: \nNo means: ",
    "STATE:\nSCHEMA FIELDS:\nFIELD 1\nID: TYPE: INSTRUCTION: ALLOWED OPTIONS:\nOPTION 1: END FIELD\n",
    '{"description":"Payments or invoices","option_id":"billing"} JOINT SCHEMA DECISIONS:',
    "App: Cua Driver\nTask family: closed-candidate decision\n\nAccessibility tree:\nOptions:\n",
    'A. Decision "Click Delete" -> select\nB. Decision "Click Cancel" -> select',
]


def byte_alphabet() -> list[str]:
    """GPT-2's byte → printable-character table, in id order (what Qwen's first 256 ids are)."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = [chr(b) for b in printable]
    extra = 0
    for b in range(256):
        if b not in printable:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


# Full-size benchmark checkpoints also learn the models' fixed prompt text, so their prompts
# tokenize to lengths like the real tokenizer's, fixed scaffold included.
PROMPT_CORPUS = [
    "You are a one-pass computer-use decision model. You are shown the current state of a screen "
    "and a fixed, closed list of candidate (element, action) options, each given a single letter. "
    "Choose exactly one option: the single best next action to take. Answer with ONLY that "
    "option's letter -- no words, no punctuation, no explanation.",
    "Read the complete state and schema. Decide every field jointly. Each answer must be exactly one "
    "of that field's allowed options.",
    "The proposition is true or the answer is yes. The proposition is false or the answer is no.",
    "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nGoal: App: Cua Driver\nTask family: "
    'closed-candidate decision\n\nAccessibility tree:\n\n\nOptions:\nA. Decision "Click" -> select\n'
    "\n\nAnswer with a single letter.<|im_end|>\n<|im_start|>assistant\n<think>\n",
]


def train(vocab_size: int = 1500, prompts: bool = False):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    def fresh(model):
        tok = Tokenizer(model)
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(_SPLIT), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        tok.decoder = decoders.ByteLevel()
        return tok

    alphabet = byte_alphabet()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=alphabet, show_progress=False)
    learner = fresh(models.BPE())
    learner.train_from_iterator(corpus() + _EXTRA_TEXT * 20 + (PROMPT_CORPUS * 40 if prompts else []), trainer=trainer)
    learned = learner.get_vocab()
    # Renumber: the byte alphabet first in GPT-2 order, then the merges in the order learned.
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    for token, _ in sorted(learned.items(), key=lambda kv: kv[1]):
        vocab.setdefault(token, len(vocab))
    import json as _json

    merges = [
        tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)
        for m in _json.loads(learner.to_str())["model"]["merges"]
    ]
    tok = fresh(models.BPE(vocab=vocab, merges=merges))
    tok.add_special_tokens(SPECIALS)
    return tok


def save(directory: str, model_max_length: int = 262144, prompts: bool = False):
    tok = train(prompts=prompts)
    save_hf_tokenizer(tok, directory, {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, model_max_length)
    return tok
