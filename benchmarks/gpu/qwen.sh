#!/usr/bin/env bash
# A Qwen3.5-backbone model on the GPU machine, in phases (one `run` call each; benchmarks/gpu/README.md):
#   bash benchmarks/gpu/qwen.sh prepare FAMILY    # wheels, a full-size random checkpoint, its export(s)
#   bash benchmarks/gpu/qwen.sh bench FAMILY      # in-process and HF baselines, then HTTP load
#   bash benchmarks/gpu/qwen.sh first FAMILY      # start-to-ready, first requests against steady (benchmarks.first_requests)
# FAMILY: cua-s1 (4B), open-jev (9B; JEV=27b: Open-Jev-27B-v1.1), clef-flash (9B). onnxruntime-gpu must
# already be unpacked in /tmp/ortsite, and `.whl` carried in the first prepare call.
#
# KERNELS     exports to write, one a GatedDeltaNet kernel (gdnf: gated_delta_net_fused, as served on a
#             GPU; la: linear_attention, the portable one), into /tmp/omni/ex-FAMILY-ENTRY (default gdnf).
# DTYPE       the exports' dtype (default float16); EX_SUFFIX names another dtype's exports apart.
# EXPORT_ARGS more options for models.export. PARITY_GATE (default record): random full-size stacks
#             amplify rounding past the fp16 gate's bound, so the exports record the gate instead of refusing.
# DESCRIBED=1 the checkpoint as its description only (no shards: the weights are drawn as each export
#             and baseline loads them), so the 27B (a 52 GB export) fits the one-GPU machine's disk.
# DETACH=1    (prepare) run in the background; then repeat `qwen.sh wait FAMILY` (up to WAIT_S, 540 s,
#             a call) until it prints `done`: the 27B's export outlasts one call.
# first:      CONCURRENCY's levels (default 1,16), a fresh server each; SETTLE, the most seconds to wait
#             for idle captures (default 400); WORKLOAD instead of the family's own; CODE=DIR serves
#             another commit's app and models (LABEL names its files apart).
# WORKLOADS   the workloads to load each server with (none: no HTTP), CONCURRENCY (default 1,16),
#             REQUESTS a pass (default 200), LOAD_ARGS more options for benchmarks.load.
# SERVES      servers measured one after another, LABEL[:NAME=VALUE,...] each; files get -LABEL. Unset:
#             one server, unlabelled files. K=ENTRY serves that KERNELS entry's export (default the
#             last), K=/DIR the export in DIR; CODE=DIR serves another commit's app, carried along.
# INPROCESS=0, HF=0, DRIFT=1: skip the in-process bench (qwen_bench, BENCH_ARGS), skip the HF
#             transformers baseline (hf_baseline), add the layer-by-layer fp16 drift (drift.py).
set -euo pipefail
phase=${1:?prepare, wait, first or bench}
family=${2:?cua-s1, open-jev or clef-flash}
OUT=${OUT:-/tmp/omni-out}
DTYPE=${DTYPE:-float16}
KERNELS=${KERNELS:-gdnf}
mkdir -p "$OUT" /tmp/omni
export PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD PYTHONUNBUFFERED=1
case $family in
  cua-s1) size=4b ;;
  open-jev|clef-flash) size=9b ;;
esac
variant=9b
[ "$family" = open-jev ] && [ "${JEV:-9b}" = 27b ] && { size=27b; variant=27b-v1.1; }
if [ "$phase" = prepare ] && [ "${DETACH:-0}" = 1 ]; then
  rm -f /tmp/omni/prepare-$family.done
  DETACH=0 setsid nohup bash -c "bash $0 prepare $family > /tmp/omni/prepare-$family.log 2>&1; echo \$? > /tmp/omni/prepare-$family.done" \
    > /dev/null 2>&1 &
  echo "prepare $family running in the background: /tmp/omni/prepare-$family.log"; exit 0
fi
if [ "$phase" = wait ]; then      # up to WAIT_S (default 540) seconds, then the log's tail
  for _ in $(seq 1 $(( ${WAIT_S:-540} / 5 ))); do [ -f /tmp/omni/prepare-$family.done ] && break; sleep 5; done
  grep -v -i warn /tmp/omni/prepare-$family.log | tail -${TAIL:-6}; df -h /tmp | tail -1
  [ -f /tmp/omni/prepare-$family.done ] && { echo "done, exit $(cat /tmp/omni/prepare-$family.done)"; exit 0; }
  echo "still running"; exit 0
fi
CK=/tmp/omni/ck-$size
DESCRIBE=()
if [ "${DESCRIBED:-0}" = 1 ]; then
  CK=/tmp/omni/ck-$size-described; DESCRIBE=(--described)
fi
EX=/tmp/omni/ex-$family${EX_SUFFIX:-}
SRC=$CK
EXTRA=(${EXPORT_ARGS:-})
ADAPTER=()      # what the export merged: the references merge it too
[ "$family" = open-jev ] && { SRC=/tmp/omni/pkg-$size/checkpoint; EXTRA+=(--base $CK); ADAPTER=(--adapter $SRC/adapter); }
[ "$family" = clef-flash ] && SRC=/tmp/omni/clef-9b
if [ "$phase" = first ]; then    # a fresh server's first requests against its steady state, a level at a time
  w=${WORKLOAD:-$(case $family in cua-s1) echo cua_218 ;; clef-flash) echo clef_1q ;;
    *) [ $size = 27b ] && echo open_jev_noul_27b || echo open_jev_noul ;; esac)}
  c_list=${CONCURRENCY:-1,16}; label=${LABEL:-$family}
  for c in ${c_list//,/ }; do
    OMNI_MODELS=$EX-${KERNELS##* } OMNI_DEVICE=cuda python3 -m benchmarks.first_requests \
      --workload benchmarks/workloads/$w.jsonl --concurrency $c --settle ${SETTLE:-400} --label $label \
      --code "${CODE:-$PWD}" --out "$OUT/first-$label-c$c.json" --logs "$OUT/logs-$label-c$c"
  done
  exit 0
fi
if [ "$phase" = prepare ]; then
  if [ -d .whl ] && [ -z "${SKIP_WHEELS:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  fi
  python3 -c 'import onnxruntime as o, torch, transformers; o.preload_dlls(); print("onnxruntime", o.__version__, o.get_available_providers(), "torch", torch.__version__, "transformers", transformers.__version__)'
  t0=$(date +%s)
  # Built aside and renamed into place: prepares of one size side by side (two dtypes) share it.
  if [ ! -f $CK/config.json ]; then
    python3 -m models.qwen35.random_checkpoint $CK.part-$$ --size $size "${DESCRIBE[@]}"
    mv -T $CK.part-$$ $CK 2>/dev/null || rm -rf $CK.part-$$
  fi
  echo "random checkpoint $(( $(date +%s) - t0 )) s"; du -sh $CK
  [ "$family" = open-jev ] && python3 -m models.open_jev.random_checkpoint --full $CK /tmp/omni/pkg-$size --variant $variant
  [ "$family" = clef-flash ] && python3 -m models.clef_flash.random_checkpoint --full $CK /tmp/omni/clef-9b
  pids=()
  for k in $KERNELS; do
    case $k in gdnf) kernel=gated_delta_net_fused ;; *) kernel=linear_attention ;; esac
    python3 -m models.export $family --checkpoint $SRC "${EXTRA[@]}" --out $EX-$k --dtype $DTYPE \
      --gdn-kernel $kernel \
      --parity-gate ${PARITY_GATE:-record} \
      > "$OUT/export-$family${EX_SUFFIX:-}-$k.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait $p; done
  for k in $KERNELS; do grep -v Warn "$OUT/export-$family${EX_SUFFIX:-}-$k.log" | tail -3; done
  echo "build+export $(( $(date +%s) - t0 )) s"; df -h /tmp | tail -1
  exit 0
fi
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee "$OUT/gpu.csv"
python3 -m benchmarks.host_facts --out "$OUT/host.json" || echo "host_facts failed"   # the CPU, its steal, a Python probe, the GPU clocks
exports=$(for k in $KERNELS; do printf '%s=%s,' $k $EX-$k; done); exports=${exports%,}
if [ "$family" != clef-flash ] && [ "${INPROCESS:-1}" = 1 ]; then
  python3 -m benchmarks.gpu.qwen_bench --checkpoint $CK "${ADAPTER[@]}" --exports $exports --out "$OUT/inprocess-$family.json" \
    ${BENCH_ARGS:-} 2>&1 | grep -v -i warn | tail -${BENCH_TAIL:-8} || echo "qwen_bench failed (the HTTP runs go on)"
fi
if [ "$family" != cua-s1 ] && [ "${HF:-1}" = 1 ]; then
  ws=(); for w in ${WORKLOADS:?}; do ws+=(--workload benchmarks/workloads/$w.jsonl); done
  base=$CK; [ "$family" = clef-flash ] && base=$SRC
  python3 -m benchmarks.gpu.hf_baseline --family $family --checkpoint $base --export $EX-${KERNELS##* } \
    "${ws[@]}" --out "$OUT/hf-$family.json" 2>&1 | grep -v -i warn | tail -5
fi
if [ "${DRIFT:-0}" = 1 ]; then
  python3 -m benchmarks.gpu.drift --checkpoint $CK "${ADAPTER[@]}" --exports $exports --out "$OUT/drift-$family.json" 2>&1 \
    | grep -v -i warn | tail -12
fi
[ -n "${WORKLOADS:-}" ] || exit 0
# Servers run through RSGI on uvloop, as served (Granian's own `auto` loop would take rloop, which
# .whl carries).
for serve in ${SERVES:-default}; do
  label=${serve%%:*}; settings=; [ "$serve" != "${serve#*:}" ] && settings=${serve#*:}
  tag=$family; [ "$serve" != default ] && tag=$family-$label
  best=${KERNELS##* }; k=$(echo ",$settings," | sed -n 's/.*,K=\([^,]*\),.*/\1/p'); [ -n "$k" ] && best=$k
  t0=$(python3 -c 'import time; print(time.time())')
  code=$(echo ",$settings," | sed -n 's/.*,CODE=\([^,]*\),.*/\1/p'); code=$(cd "${code:-.}" && pwd)
  (cd "$code" && PYTHONPATH=/tmp/ortsite:/tmp/site:$code exec env GRANIAN_INTERFACE=${GRANIAN_INTERFACE:-rsgi} \
    GRANIAN_LOOP=${GRANIAN_LOOP:-uvloop} ${settings//,/ } \
    OMNI_MODELS=$(case $best in /*) echo $best ;; *) echo $EX-$best ;; esac) OMNI_DEVICE=cuda python3 -m granian --workers 1 --host 127.0.0.1 --port 18081 --log-level warning \
    app.main:app) > "$OUT/server-$tag.log" 2>&1 &
  S=$!
  # Start-to-ready and the first request after it (the first workload's first line).
  python3 -m benchmarks.startup --since "$t0" --port 18081 --pid $S --first benchmarks/workloads/${WORKLOADS%% *}.jsonl \
    --readyz-out "$OUT/readyz-$tag.json" | tee "$OUT/startup-$tag.txt" || { tail -30 "$OUT/server-$tag.log"; kill $S; exit 1; }
  nvidia-smi --query-gpu=memory.used --format=csv,noheader | tee "$OUT/gpu_mem_serving-$tag.txt"
  for w in ${WORKLOADS:?}; do
    out=$OUT/http_$w.json; [ "$serve" != default ] && out=$OUT/http_$w-$label.json
    python3 -m benchmarks.load --url http://127.0.0.1:18081 --workload benchmarks/workloads/$w.jsonl \
      --concurrency ${CONCURRENCY:-1,16} --requests ${REQUESTS:-200} --out "$out" --label "$w${tag#$family}" \
      ${LOAD_ARGS:-}
  done
  python3 -m benchmarks.scrape http://127.0.0.1:18081 > "$OUT/metrics-$tag.txt" || true
  # What the captured graphs hold, after every workload ran.
  nvidia-smi --query-gpu=memory.used --format=csv,noheader | tee -a "$OUT/gpu_mem_serving-$tag.txt"
  kill $S; wait $S 2>/dev/null || true
done
