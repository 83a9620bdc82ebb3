"""Which nodes of a graph ONNX Runtime places on the CPU provider when CUDA is asked for.

    python benchmarks/gpu/placement_probe.py EXPORT/model.onnx

CUDA-graph capture is refused when a host-computed tensor has to be copied to the device; this
lists the host-side nodes (op types counted, then the first 30 by name) so the culprit shows.
It found GroupQueryAttention's `seqlens_k`, built from Shape on the host (models/qwen35/fused.py).
"""
import collections
import json
import sys


def main(path: str) -> None:
    import numpy as np
    import onnxruntime as ort

    ort.preload_dlls()
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.log_severity_level = 3
    session = ort.InferenceSession(path, options, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    session.run(None, {"input_ids": np.ones((1, 64), np.int64), "positions": np.array([63])})
    with open(session.end_profiling()) as f:
        events = json.load(f)
    on_cpu = {e["name"].rsplit("_", 2)[0]: e["args"].get("op_name") for e in events
              if e.get("cat") == "Node" and e["args"].get("provider") == "CPUExecutionProvider"}
    print(len(on_cpu), collections.Counter(on_cpu.values()))
    print(list(on_cpu.items())[:30])


if __name__ == "__main__":
    main(sys.argv[1])
