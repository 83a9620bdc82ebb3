"""One short text through tokenizers after a sleep: encode_batch_fast (a hop to rayon's pool,
unless TOKENIZERS_PARALLELISM=false) against encode (inline, holding the GIL), alternated.
Usage: python tokhop.py SLEEP_MS N"""
import os, sys, time, statistics, json
sys.path.insert(0, ".")
from models.tokenizer_training import train_bpe
sleep_ms = float(sys.argv[1]); n = int(sys.argv[2])
tok = train_bpe(["<|im_start|>", "<|im_end|>"], vocab_size=2000)
text = "I was charged twice for my order. Please refund the duplicate today, and soon."
calls = {"batch": lambda: tok.encode_batch_fast([text], add_special_tokens=False)[0].ids,
         "encode": lambda: tok.encode(text, add_special_tokens=False).ids}
for c in calls.values():
    for _ in range(200): c()
ts = {k: [] for k in calls}
for i in range(n):
    for k, c in calls.items():
        if sleep_ms: time.sleep(sleep_ms / 1000)
        t = time.perf_counter_ns(); c(); ts[k].append((time.perf_counter_ns() - t) / 1000)
print(os.environ.get("TOKENIZERS_PARALLELISM"), sleep_ms, {k: round(statistics.median(v), 1) for k, v in ts.items()})
