#!/usr/bin/env bash
# Installs what the image test needs from Debian's packages when it is missing: the engine
# (dockerd, containerd, runc, the docker CLI), debootstrap, and the Distribution registry that the
# release test pushes to (tests/deploy/test_rollout.py). Root only. No daemon is started
# here (the test starts its own, see engine.py), nor by the packages' scripts.
set -euo pipefail
missing=()
for pair in dockerd:docker.io docker:docker.io containerd:containerd runc:runc debootstrap:debootstrap \
    docker-registry:docker-registry; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "${pair%%:*}" >/dev/null 2>&1 \
    || missing+=("${pair#*:}")
done
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring)
[ ${#missing[@]} -eq 0 ] && exit 0
[ "$(id -u)" = 0 ] || { echo "get_engine: not root; cannot install ${missing[*]}" >&2; exit 3; }
# Keep the packages' maintainer scripts from starting a system dockerd.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u) >&2
