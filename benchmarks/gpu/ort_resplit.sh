#!/usr/bin/env bash
# Halve the onnxruntime-gpu chunks that ../shared/tools/ort-gpu-carry leaves in .ortgpu/1..N-1
# (48 MiB each) into .ortgpu/1a, 1b, 2a, ...: a carry call takes the working tree too, and 48 MiB
# beside this repo's ~15 MiB comes within a few hundred KiB of the 64 MiB a call may carry, and a
# call over it is refused. The parts keep their order by name (part.0a, part.0b, ...,
# part.4), which is the order .ortgpu/N/install.sh joins them in. Run from the repo root, after
# ort-gpu-carry; then carry each new folder in turn (`mkdir -p /tmp/ortgpu && cp .ortgpu/1a/part.*
# /tmp/ortgpu/`, ...), and the last folder, unchanged, in the call that installs.
set -euo pipefail
cd .ortgpu
last=$(ls -d [0-9]* | grep -E '^[0-9]+$' | sort -n | tail -1)
for n in $(ls -d [0-9]* | grep -E '^[0-9]+$' | sort -n); do
  [ "$n" = "$last" ] && continue
  part=$(ls $n/part.*); name=$(basename $part)
  mkdir -p ${n}a ${n}b
  size=$(stat -c %s $part); half=$(( (size + 1) / 2 ))
  head -c $half $part > ${n}a/${name}a
  tail -c +$(( half + 1 )) $part > ${n}b/${name}b
  [ $(( $(stat -c %s ${n}a/${name}a) + $(stat -c %s ${n}b/${name}b) )) = $size ] || { echo "split of $part failed"; exit 1; }
  rm -r $n
done
ls -d */ | tr -d / | tr '\n' ' '; echo
