import os, sys, time, statistics
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
text = "I was charged twice for my order last week and the support line never called me back about it."
def bench(f, n=5000):
    for _ in range(200): f()
    ts=[]
    for _ in range(5):
        t=time.perf_counter(); c0=time.process_time()
        for _ in range(n): f()
        ts.append(((time.perf_counter()-t)/n*1e6, (time.process_time()-c0)/n*1e6))
    return min(ts)
print("TOKENIZERS_PARALLELISM=%s" % os.environ.get("TOKENIZERS_PARALLELISM"))
print("encode_batch_fast([t]) wall/cpu µs: %.1f / %.1f" % bench(lambda: tok.encode_batch_fast([text], add_special_tokens=False)))
print("encode(t)            wall/cpu µs: %.1f / %.1f" % bench(lambda: tok.encode(text, add_special_tokens=False)))
print("encode_batch_fast(8) wall/cpu µs: %.1f / %.1f" % bench(lambda: tok.encode_batch_fast([text]*8, add_special_tokens=False), 1000))
