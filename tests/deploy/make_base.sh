#!/usr/bin/env bash
# make_base.sh TAG: imports a Debian bookworm base image (python3 3.11 + venv) named TAG into the
# engine at $DOCKER_HOST; no image registry is needed. The debootstrapped tree (minbase, about a
# minute to make) is cached in $OMNI_CI_CACHE (default ~/.cache/system1-omni-ci). Root only.
set -euo pipefail
tag=$1
cache=${OMNI_CI_CACHE:-$HOME/.cache/system1-omni-ci}
rootfs=$cache/rootfs-bookworm-minbase-python3-v1   # bump the suffix when the package list changes
if [ ! -x "$rootfs/usr/bin/python3" ]; then
  mkdir -p "$cache"
  rm -rf "$rootfs.tmp"
  # No mirror named: debootstrap's default Debian mirror.
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs.tmp" >&2
  rm -rf "$rootfs.tmp"/var/cache/apt/archives/*.deb "$rootfs.tmp"/var/lib/apt/lists/* \
         "$rootfs.tmp"/usr/share/doc/* "$rootfs.tmp"/usr/share/man/* "$rootfs.tmp"/usr/share/locale/*
  rm -rf "$rootfs" && mv "$rootfs.tmp" "$rootfs"
fi
# The image trusts what this host trusts: pip inside the build reaches PyPI through the same
# network (a TLS-inspecting proxy's certificate included, where there is one).
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
fi
tar -C "$rootfs" --numeric-owner -c . \
  | docker import --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$tag" >&2
