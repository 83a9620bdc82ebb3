#!/usr/bin/env bash
# One-GPU machine, Laya english fp16 (mha16), laya_48. After the ort-gpu-carry calls:
#   g.sh $OUT prep    ONNX Runtime, wheels, a full-size random checkpoint and its export
#   g.sh $OUT probe   pass_probe at 1-64 rows (ROWS), the branch with OMNI_CUDA_GRAPH_ROWS=16 then 64
#                     (GRAPH_ROWS, "16 64 16 64")
#   g.sh $OUT bench   laya_h200.sh bench: main (.base/prev = git archive d3147a4 app models), the
#                     branch, and the branch with OMNI_DISCONNECT_WATCH_MS=10, in turn, once per round (RS, "1 2");
#                     ORDER="watch10 branch main" runs them in the reverse order
# Call i: ORDER="off t1old t1" (tracing off; 1% sampling with the code before the sampling
# decision moved ahead of the SDK, .base/prev2 = git archive 4b67b74 app models; 1% with it).
# "branch" is the working tree as it was: in calls g1/g2 commit 155d1a9 (row buckets in steps of 8,
# the watch after 1 ms), in h1/h2 the final code (steps of 4, the watch after 10 ms by default).
# Only a few files come back from a call, so each phase returns one archive.
R=$1; phase=$2; mkdir -p $R/$phase; t0=$(date +%s)
trap 'tar -C $R -czf $R/$phase.tgz $phase && rm -rf $R/$phase' EXIT
trap 'exit 143' TERM
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/$phase
case $phase in
prep)
  bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  EXPORTS="mha16=mha:float16" SKIP_WHEELS=1 bash benchmarks/gpu/laya_h200.sh prepare 2>&1 | grep -v -i warn | tail -3 ;;
probe)
  for rows in ${GRAPH_ROWS:-16 64 16 64}; do
    OMNI_CUDA_GRAPH_ROWS=$rows python3 -m benchmarks.gpu.pass_probe --export /tmp/omni/ex-mha16 \
      --workload benchmarks/workloads/laya_48.jsonl --rows ${ROWS:-1,16,17,22,24,32,40,48,64} --iters 100 --top 3 \
      --out $OUT/probe-rows$rows-$(date +%s).json 2>&1 | grep -v -i warn | head -40
  done
  nvidia-smi --query-gpu=memory.used --format=csv,noheader ;;
bench)
  # Tracing at 1% (configs t1, t1old) exports to a local sink that accepts everything.
  T=OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318,OTEL_TRACES_SAMPLER=parentbased_traceidratio,OTEL_TRACES_SAMPLER_ARG=0.01
  case " ${ORDER:-} " in *" t1"*)
    python3 benchmarks/otlp_sink.py 4318 --host 127.0.0.1 > /dev/null 2>&1 & SINK=$! ;;
  esac
  S=""
  for round in ${RS:-1 2}; do
    k=0
    for c in ${ORDER:-main branch watch10}; do
      # R (an unused variable) only names the server and its files: round and place, so that
      # two servers of one kind in a round keep their own files (call i3 lost four to that).
      k=$((k + 1)); r=${round}_$k
      case $c in
        main) S="$S mha16:64::uvloop:.base/prev:R=$r" ;;
        branch) S="$S mha16:64::uvloop::R=$r" ;;
        watch10) S="$S mha16:64::uvloop::R=$r,OMNI_DISCONNECT_WATCH_MS=10" ;;
        off) S="$S mha16:64::uvloop::R=$r" ;;
        t1) S="$S mha16:64::uvloop::R=$r,$T" ;;
        t1old) S="$S mha16:64::uvloop:.base/prev2:R=$r,$T" ;;
      esac
    done
  done
  SERVERS="$S" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn
  [ -z "${SINK:-}" ] || kill $SINK ;;
esac
echo "$phase $(( $(date +%s) - t0 )) s"
