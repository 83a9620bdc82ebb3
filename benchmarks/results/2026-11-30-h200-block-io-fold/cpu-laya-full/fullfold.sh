set -x
cd /work/main && . .venv/bin/activate
t0=$(date +%s)
python -m models.laya.random_checkpoint /tmp/lfull/ck --variant english --size full
echo "ck $(( $(date +%s) - t0 )) s"
(cd /tmp/prevcode && python -m models.export laya --checkpoint /tmp/lfull/ck --out /tmp/lfull/ex-prev) 2>&1 | grep -v -i warn | tail -2
echo "prev export $(( $(date +%s) - t0 )) s"
python -m models.export laya --checkpoint /tmp/lfull/ck --out /tmp/lfull/ex-new 2>&1 | grep -v -i warn | tail -3
echo "new export $(( $(date +%s) - t0 )) s"
for i in 1 2 3; do for e in prev new; do
python - $e <<'PY'
import sys, time, onnxruntime as ort
e=sys.argv[1]
o=ort.SessionOptions(); o.graph_optimization_level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL; o.log_severity_level=3
t=time.perf_counter(); ort.InferenceSession('/tmp/lfull/ex-%s/model.onnx'%e, o, providers=['CPUExecutionProvider']); print(e, 'CPU session %.2f s' % (time.perf_counter()-t), flush=True)
PY
done; done
ls -la /tmp/lfull/ex-prev /tmp/lfull/ex-new
