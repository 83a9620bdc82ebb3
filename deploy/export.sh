#!/bin/sh
# omni-export (the export image's entrypoint): export every model named in OMNI_MODELS into
# $OMNI_MODEL_ROOT/<name>/<version>/ and point $OMNI_MODEL_ROOT/<name>/current at it once it is
# complete (python -m models.export --publish, models/publish.py); a version published already is
# not exported again. An entry is
#   - a published name: english, multilingual, typed-decisions (Laya), cua-s1-4b-0.2,
#     open-jev-9b, open-jev-27b-v1.1, clef-flash, each pinned to the revision docs/models.md names
#     (OMNI_REVISION pins the Laya ones elsewhere);
#   - name=checkpoint (a Hub id or a directory; a Laya checkpoint), or
#     name=family:checkpoint with family laya, cua-s1, open-jev or clef-flash;
#   - name=demo for the random-weight Laya demo checkpoint.
# OMNI_REVISION pins Hub downloads of name=... entries (unset: the commit the Hub's main branch
# names when the export runs, recorded in the version); OMNI_EXPORT_DTYPE (float32, float16,
# bfloat16) and OMNI_GDN_KERNEL (linear_attention, or gated_delta_net_fused: CUDA only) apply to Qwen3.5 families,
# OMNI_LAYA_EXPORT_DTYPE (float32, float16) to Laya. The defaults here are the portable ones
# (float32, linear_attention); compose.yaml asks for float16 and the fused kernel on the GPU.
# OMNI_CUDA_GDN_PLAN, the server's GatedDeltaNet engine, is the one a Qwen3.5 gate runs.
# OMNI_EXPORT_MEMORY_LIMIT (bytes, or 64Gi...: the memory the server has, the pod's limit), capped by
# the memory of the GPU the export runs on (models/export.py), refuses, before writing, an export
# whose weights plus a margin exceed it (exit status 4).
# A half-precision export whose graph fails its parity gate, or whose gate cannot run here (the
# exporter's exit status 3), is redone in float32, which needs no gate, with a warning: the
# server still gets a model, where float32's twice the memory fits OMNI_EXPORT_MEMORY_LIMIT. Any
# other failure (a checkpoint that cannot be had, refused options, a GPU out of memory, a full
# disk) fails the service as it is, rather than serving twice the memory at a fraction of the speed.
set -eu
root=${OMNI_MODEL_ROOT:-/models}
laya_revision=55cf4c4ebb4ebe31b2550e8bdf3bd21b99753851

# gated FAMILY DTYPE ARGS...: export in DTYPE, or in float32 when DTYPE's parity gate says no.
gated() {
  family_=$1 dtype_=$2
  shift 2
  status=0
  python -m models.export "$family_" "$@" --dtype "$dtype_" || status=$?
  [ "$status" -ne 0 ] || return 0
  if [ "$dtype_" = float32 ] || [ "$status" -ne 3 ]; then exit "$status"; fi
  echo "omni-export: the $dtype_ export of $name failed its parity gate (see above); exporting float32 instead" >&2
  status=0
  python -m models.export "$family_" "$@" --dtype float32 || status=$?
  [ "$status" -ne 4 ] || echo "omni-export: $name has no export its server can hold: the $dtype_ one failed its gate, the float32 one does not fit (see above)" >&2
  [ "$status" -eq 0 ] || exit "$status"
}

for entry in $(echo "${OMNI_MODELS:-english}" | tr ',' ' '); do
  name=${entry%%=*}
  source=${entry#*=}
  family=laya
  revision=${OMNI_REVISION:-}
  extra=""
  if [ "$name" = "$entry" ]; then
    case "$name" in
      english) source=convaiinnovations/laya; revision=${OMNI_REVISION:-$laya_revision} ;;
      multilingual) source=convaiinnovations/laya/multilingual; revision=${OMNI_REVISION:-$laya_revision} ;;
      typed-decisions) source=convaiinnovations/laya/typed-decisions; revision=${OMNI_REVISION:-$laya_revision} ;;
      cua-s1-4b-0.2) family=cua-s1; source=Qwen/Qwen3.5-4B; revision=851bf6e806efd8d0a36b00ddf55e13ccb7b8cd0a
                     extra="--adapter cua-ai/cua-s1-4b-0.2/text" ;;
      open-jev-9b) family=open-jev; source=ZefanCai/Open-Jev-9B/package/checkpoint
                   revision=47e966881e489511c0c7f5633a9e1960a676a551 ;;
      open-jev-27b-v1.1) family=open-jev; source=ZefanCai/Open-Jev-27B-v1.1/package/checkpoint
                         revision=28cf73067d5b337860bbef3c85b8b82ba8730956 ;;
      clef-flash) family=clef-flash; source=Cloudflare/clef-flash; revision=17f0b0ad64efb65d273590632833508766b2aae6 ;;
      *) echo "omni-export: no published checkpoint is named $name; write $name=CHECKPOINT" >&2; exit 2 ;;
    esac
  else
    case "$source" in
      laya:*|cua-s1:*|open-jev:*|clef-flash:*) family=${source%%:*}; source=${source#*:} ;;
    esac
  fi
  if [ "$source" = demo ]; then
    source=$root/.demo-checkpoint
    if [ ! -f "$source/model.safetensors" ]; then
      # Built aside and renamed into place: servers exporting at once never read a half-built one.
      partial=$root/.demo-checkpoint.partial.${HOSTNAME:-local}.$$
      python -m models.laya.random_checkpoint "$partial" --size demo
      mv -T "$partial" "$source" 2>/dev/null || rm -rf "$partial"
    fi
  fi
  set -- --checkpoint "$source" --publish "$root/$name" --name "$name"
  if [ -n "$revision" ]; then set -- "$@" --revision "$revision"; fi
  if [ -n "${OMNI_EXPORT_MEMORY_LIMIT:-}" ]; then set -- "$@" --memory-limit "$OMNI_EXPORT_MEMORY_LIMIT"; fi
  if [ "$family" != laya ]; then
    # shellcheck disable=SC2086  # $extra is a flag and its value
    set -- "$@" --gdn-kernel "${OMNI_GDN_KERNEL:-linear_attention}" $extra
    # The parity gate runs the engine the server will (the server's own setting, when given).
    if [ -n "${OMNI_CUDA_GDN_PLAN:-}" ]; then set -- "$@" --gdn-plan "$OMNI_CUDA_GDN_PLAN"; fi
    gated "$family" "${OMNI_EXPORT_DTYPE:-float32}" "$@"
  else
    gated laya "${OMNI_LAYA_EXPORT_DTYPE:-float32}" "$@"
  fi
done
