import json, sys, collections, numpy as np, onnxruntime as ort
ort.preload_dlls()
path = sys.argv[1]
o = ort.SessionOptions(); o.enable_profiling = True; o.log_severity_level = 3
s = ort.InferenceSession(path, o, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
s.run(None, {"input_ids": np.ones((1, 64), np.int64), "positions": np.array([63])})
ev = json.load(open(s.end_profiling()))
cpu = {}
for e in ev:
    if e.get("cat") == "Node" and e["args"].get("provider") == "CPUExecutionProvider":
        cpu[e["name"].rsplit("_", 2)[0]] = e["args"].get("op_name")
print(len(cpu), collections.Counter(cpu.values()))
print(list(cpu.items())[:30])
