#!/usr/bin/env bash
# Prints the path of a Python that runs `-m kubernetes_validate` (the Kubernetes API's JSON schemas,
# strict: unknown fields refused), installing it once into a venv of its own from
# tests/deploy/kubernetes-validate.txt (pinned, with hashes), so the project's venv is untouched.
# Needs no root and no cluster. Cache: $OMNI_CI_CACHE (default ~/.cache/system1-omni-ci).
set -euo pipefail
lock=$(cd "$(dirname "$0")" && pwd)/kubernetes-validate.txt
cache=${OMNI_CI_CACHE:-$HOME/.cache/system1-omni-ci}
venv=$cache/kubernetes-validate-$(sha256sum "$lock" | cut -c1-12)
# The stamp is written last: a venv without it is an install that did not finish.
if [ -f "$venv/.installed" ]; then echo "$venv/bin/python"; exit 0; fi
rm -rf "$venv"
"${PY:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install -q --no-deps --require-hashes -r "$lock" >&2
touch "$venv/.installed"
echo "$venv/bin/python"
