#!/usr/bin/env bash
# One-GPU machine: where Laya's tokenizer call runs at c=64, through RSGI (as served).
# (OMNI_TOKENIZE_OFF_LOOP, which `tok` measures, was taken out after these calls.)
# After the ort-gpu-carry calls, one call per phase:
#   CUA=0 bash benchmarks/results/2026-12-01-h200-rsgi/r.sh $OUT prep    ONNX Runtime, wheels, Laya english fp16
#   l.sh $OUT tok    laya_48 at c=1, 8, 16, 64 and 8 s at c=64 (loop CPU a request) on servers in ORDER:
#                    on = the call on the loop (main), off = OMNI_TOKENIZE_OFF_LOOP=1,
#                    off1 = off with TOKENIZERS_PARALLELISM=false, off4 = off with RAYON_NUM_THREADS=4
#   l.sh $OUT held   the same, main (.base/prev: `git archive` of app and models, carried) against this
#                    tree, where a pass's answers go out once the next pass is packed (ORDER of prev/new)
#   (a second lease) bash benchmarks/results/2026-12-01-h200-micro-batches/q.sh $OUT prep: the same, and
#                    Open-Jev 9B (gdnf) beside it
#   l.sh $OUT jev    qwen_h200.sh bench open-jev through RSGI, open_jev_noul at c=1, 4 and 16, main
#                    (.base/prev) against this tree (ORDER of prev/new)
#   (a third lease, after r.sh prep as in the first) l.sh $OUT rayon   laya_48 as in `tok`, the tokenizer
#                    call on the loop (as served), its thread pool (RAYON_NUM_THREADS) in ORDER (0: its own)
#   (a fourth lease, after r.sh prep) l.sh $OUT final   laya_48 on main (.base/prev) against this tree,
#                    where the tokenizer's pool has 4 threads (OMNI_TOKENIZER_THREADS), ORDER of prev/new;
#                    then py-spy on this tree's server at c=64 sampling only the thread that holds the GIL
# Only a few files come back from a call, so each phase returns one archive.
R=$1; phase=$2; mkdir -p $R/$phase; t0=$(date +%s)
trap 'tar -C $R -czf $R/$phase.tgz $phase && rm -rf $R/$phase' EXIT
trap 'exit 143' TERM
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD OUT=$R/$phase
case $phase in
tok)
  S=""; k=0
  for v in ${ORDER:-on off off1 off4 off4 off1 off on}; do
    k=$((k + 1))
    case $v in
      on) e= ;;
      off) e=,OMNI_TOKENIZE_OFF_LOOP=1 ;;
      off1) e=,OMNI_TOKENIZE_OFF_LOOP=1,TOKENIZERS_PARALLELISM=false ;;
      off4) e=,OMNI_TOKENIZE_OFF_LOOP=1,RAYON_NUM_THREADS=4 ;;
    esac
    S="$S mha16:320::uvloop::R=$k$e"
  done
  SERVERS="$S" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn ;;
held)
  S=""; k=0
  for v in ${ORDER:-prev new new prev prev new}; do
    k=$((k + 1)); code=; [ $v = prev ] && code=.base/prev
    S="$S mha16:320::uvloop:$code:R=$k,V=$v"
  done
  SERVERS="$S" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn ;;
jev)
  S=""; k=0
  for v in ${ORDER:-prev new new prev}; do
    k=$((k + 1)); case $v in prev) S="$S prev$k:CODE=.base/prev" ;; new) S="$S new$k" ;; esac
  done
  OUT=$OUT INPROCESS=0 HF=0 KERNELS=gdnf SERVES="$S" WORKLOADS=open_jev_noul CONCURRENCY=${CONC:-1,4,16} REQUESTS=48 \
    LOAD_ARGS="--warmup 96 --per-request" GRANIAN_LOOP=uvloop bash benchmarks/gpu/qwen_h200.sh bench open-jev 2>&1 \
    | grep -v -i warn | tail -40 ;;
rayon)
  S=""; k=0
  for v in ${ORDER:-0 4 2 2 4 0}; do
    k=$((k + 1)); e=; [ $v = 0 ] || e=,RAYON_NUM_THREADS=$v
    S="$S mha16:320::uvloop::R=$k$e"
  done
  SERVERS="$S" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn ;;
final)
  S=""; k=0
  for v in ${ORDER:-prev new new prev}; do
    k=$((k + 1)); code=; [ $v = prev ] && code=.base/prev
    S="$S mha16:320::uvloop:$code:R=$k,V=$v"
  done
  SERVERS="$S" WORKLOADS1Q=laya_48 WORKLOADS3Q="" INPROCESS=0 bash benchmarks/gpu/laya_h200.sh bench 2>&1 | grep -v -i warn
  PATH=/tmp/site/bin:$PATH GRANIAN_LOOP=uvloop OMNI_CUDA_GRAPHS=320 python3 -m benchmarks.loop_profile \
    --export /tmp/omni/ex-mha16 --device cuda --workload benchmarks/workloads/laya_48.jsonl --seconds 6 \
    --top 30 --gil --out $OUT/profile-gil.json 2>&1 | grep -v -i warn | head -60 ;;
esac
echo "$phase $(( $(date +%s) - t0 )) s"
