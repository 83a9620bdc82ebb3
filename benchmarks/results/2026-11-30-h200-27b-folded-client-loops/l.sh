#!/usr/bin/env bash
# Call L (one-GPU machine): Cua-S1 4B fp16 exported with the fold done as the save writes (fold_lazily), otherwise as call K (consuming load, no shard
# kept mapped) under /usr/bin/time -v, its RSS sampled every second by phase.
R=$1; export OUT=$R/l; mkdir -p $OUT /tmp/omni
bash .ortgpu/5/install.sh > $OUT/ort-install.log 2>&1; tail -1 $OUT/ort-install.log
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/ortsite:/tmp/site:$PWD
python3 -m models.qwen35.random_checkpoint /tmp/omni/ck-4b --size 4b > $OUT/ck-4b.log 2>&1
/usr/bin/time -v python3 -m models.export cua-s1 --checkpoint /tmp/omni/ck-4b --out /tmp/omni/ex-cua-s1-new \
    --dtype float16 --gdn-kernel gated_delta_net_fused --parity-gate record > $OUT/export-cua.log 2>&1 &
P=$!
while kill -0 $P 2>/dev/null; do
  echo "$(date +%s) $(ps -eo rss=,args= | awk '/models\.export/ && !/awk/ {s+=$1} END {print s+0}') $(grep -v -i warn $OUT/export-cua.log | grep -E "^\[|exporting|traced|folded|wrote|gate" | tail -1 | cut -c1-60)" >> $OUT/rss.txt
  sleep 1
done
grep -v -i warn $OUT/export-cua.log | grep -E "Maximum resident|Elapsed \(wall|gate|exported|folded" | tail -6
awk 'NR==1{t0=$1} {k=substr($0, index($0,$3)); if (k!=last) {printf "%d s %.1f GiB: %s\n", $1-t0, $2/1048576, k; last=k}} {if ($2>m) {m=$2; mt=$1-t0}} END {printf "max %.1f GiB at %d s\n", m/1048576, mt}' $OUT/rss.txt
ls $OUT
