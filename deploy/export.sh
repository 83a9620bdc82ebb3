#!/bin/sh
# omni-export (the export image's entrypoint): export every model named in OMNI_MODELS into
# $OMNI_MODEL_ROOT/<name>, skipping exports that are up to date. An entry is a published name
# (english, multilingual, typed-decisions), or name=checkpoint (a Hub id or a directory), or
# name=demo for the random-weight demo checkpoint. OMNI_REVISION pins Hub downloads.
set -eu
root=${OMNI_MODEL_ROOT:-/models}
for entry in $(echo "${OMNI_MODELS:-english}" | tr ',' ' '); do
  name=${entry%%=*}
  source=${entry#*=}
  if [ "$name" = "$entry" ]; then
    case "$name" in
      english) source=convaiinnovations/laya ;;
      multilingual) source=convaiinnovations/laya/multilingual ;;
      typed-decisions) source=convaiinnovations/laya/typed-decisions ;;
      *) echo "omni-export: no published checkpoint is named $name; write $name=CHECKPOINT" >&2; exit 2 ;;
    esac
  fi
  if [ "$source" = demo ]; then
    source=$root/.demo-checkpoint
    [ -f "$source/model.safetensors" ] || python -m models.laya.random_checkpoint "$source" --size demo
  fi
  set -- --checkpoint "$source" --out "$root/$name" --name "$name"
  if [ -n "${OMNI_REVISION:-}" ]; then set -- "$@" --revision "$OMNI_REVISION"; fi
  python -m models.export laya "$@"
done
