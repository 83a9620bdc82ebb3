#!/usr/bin/env bash
# Cut a release (docs/deployment.md, "Releases"): the images of this commit, tagged
# <version>-<commit> (pyproject.toml's version, the commit's 12-character short hash) and labelled
# org.opencontainers.image.version/revision, built by compose from the same definitions as
# `docker compose build`; with REGISTRY, pushed there and the digests printed as the kustomize
# `images:` lines that pin them in an overlay, and the components' third-party images (HAProxy)
# mirrored there and pinned the same way.
#   deploy/release.sh                  build (make release)
#   REGISTRY=registry.example/omni deploy/release.sh
#   STACKS=cpu deploy/release.sh       only the CPU images (default: gpu cpu)
#   deploy/release.sh --print-tag      the tag this commit's images get, nothing built
# A tag names a commit, so a checkout with uncommitted or untracked files is refused.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)
[ -n "$version" ] || { echo "release: no version in pyproject.toml" >&2; exit 1; }
revision=$(git rev-parse HEAD)
tag="$version-$(git rev-parse --short=12 HEAD)"
if [ "${1:-}" = --print-tag ]; then
    echo "$tag"
    exit 0
fi
if [ -n "$(git status --porcelain)" ]; then
    echo "release: the checkout has changes that $tag would not name:" >&2
    git status --short >&2
    exit 1
fi

# Only the compose files' own defaults: nothing from the caller's shell picks another build.
unset ORT_EXTRA COMPOSE_FILE COMPOSE_PROFILES COMPOSE_PROJECT_NAME
export OMNI_VERSION="$tag"
# The pushed image's digest, as the registry names it.
push() {
    docker tag "$1" "$REGISTRY/$1"
    docker push --quiet "$REGISTRY/$1" >/dev/null
    docker image inspect --format '{{range .RepoDigests}}{{println .}}{{end}}' "$REGISTRY/$1" \
        | sed -n "s#^$REGISTRY/${1%%:*}@##p" | head -n 1
}

for stack in ${STACKS:-gpu cpu}; do
    case "$stack" in
        gpu) files=(-f compose.yaml) suffix= ;;
        cpu) files=(-f compose.yaml -f compose.cpu.yaml) suffix=-cpu ;;
        *) echo "release: unknown stack $stack (gpu, cpu)" >&2; exit 2 ;;
    esac
    docker compose "${files[@]}" build --build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
        export server
    if [ -z "${REGISTRY:-}" ]; then
        for name in system1-omni system1-omni-export; do
            echo "built $name:$tag$suffix $(docker image inspect --format '{{.Id}}' "$name:$tag$suffix")"
        done
        continue
    fi
    echo "# $tag$suffix: an overlay of overlays/$stack pins them with"
    echo "images:"
    for name in system1-omni system1-omni-export; do
        digest=$(push "$name:$tag$suffix")
        [ -n "$digest" ] || { echo "release: no digest for $REGISTRY/$name:$tag$suffix" >&2; exit 1; }
        echo "  - {name: $name, newName: $REGISTRY/$name, digest: $digest}"
    done
done

# The components' third-party images (the balancer's HAProxy) go to the registry beside the
# release, so that an overlay pins them by digest too and no node runs whatever an upstream tag
# names that day. The tag is pulled afresh; where the upstream registry cannot be reached (an
# air-gapped build), the engine's own copy of it is mirrored, and the script says so.
if [ -n "${REGISTRY:-}" ]; then
    mapfile -t upstream < <(sed -n 's/^ *image: *\([^ #]*\).*$/\1/p' deploy/kubernetes/components/*/*.yaml \
        | grep -v '^system1-omni' | sort -u)
    if [ "${#upstream[@]}" -gt 0 ]; then
        echo "# components/ (the balancer): an overlay that adds them pins their images with"
        echo "images:"
    fi
    for image in "${upstream[@]}"; do
        if ! docker pull --quiet "$image" >/dev/null 2>&1; then
            docker image inspect "$image" >/dev/null 2>&1 \
                || { echo "release: $image cannot be pulled and the engine has no copy of it" >&2; exit 1; }
            echo "release: $image cannot be pulled; mirroring the engine's copy of it" >&2
        fi
        digest=$(push "$image")
        [ -n "$digest" ] || { echo "release: no digest for $REGISTRY/$image" >&2; exit 1; }
        echo "  - {name: ${image%%:*}, newName: $REGISTRY/${image%%:*}, digest: $digest}"
    done
fi
