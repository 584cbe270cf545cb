#!/usr/bin/env bash
# Builds podfit's container image from deploy/Containerfile with podman and prints its name.
#
#   deploy/image/build.sh            # -> localhost/podfit:<content key>
#
# The Containerfile's base is python:3.11-slim-bookworm. Set PODFIT_BASE_IMAGE to use another (or one
# pulled ahead of time). Otherwise the script tries to pull it, and where no container registry can be
# reached it makes a base with the same contents: Debian bookworm (debootstrap --variant=minbase) with its
# Python 3.11, pip and `python`, imported into podman once per recipe. The Containerfile itself is never
# changed: only its PYTHON_IMAGE build argument.
#
# The image is tagged by a hash of everything it is built from (the Containerfile, the build context and
# the base image), so an unchanged tree is not built twice; older images of this script are removed. The host's CA bundle is mounted read-only
# into the build steps (never copied into a layer), so pip reaches PyPI through a TLS-inspecting proxy.
# Needs root (or sudo) to install podman, runc and debootstrap from Debian when they are missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/deploy/image"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers.conf}"
log() { echo "deploy/image/build.sh: $*" >&2; }

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || { log "install ${missing[*]} (apt-get is not available)"; exit 1; }
  log "installing ${missing[*]} from Debian"
  $sudo apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi

upstream_base="python:3.11-slim-bookworm"
base="${PODFIT_BASE_IMAGE:-}"
if [ -z "$base" ]; then
  if podman image exists "$upstream_base" || timeout 120 podman pull -q "docker.io/library/$upstream_base" >/dev/null 2>&1; then
    base="$upstream_base"
  else
    # The same contents as the upstream base, from Debian: bookworm's Python is 3.11. PIP_BREAK_SYSTEM_PACKAGES
    # lets the Containerfile's `pip install` write the system site-packages, as it does in the python image.
    packages="python3,python3-pip,python-is-python3,ca-certificates"
    recipe="bookworm minbase $packages"
    base="localhost/podfit-base:bookworm-$(echo "$recipe" | sha256sum | cut -c1-12)"
    if ! podman image exists "$base"; then
      log "no registry answered for $upstream_base: making $base with debootstrap"
      rootfs="$(mktemp -d)"
      trap '$sudo rm -rf "$rootfs"' EXIT
      mirror="${PODFIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
      $sudo debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" "$mirror" >&2
      $sudo rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
      $sudo tar -C "$rootfs" -c . | podman import \
        --change 'ENV PIP_BREAK_SYSTEM_PACKAGES=1' --change 'CMD ["python3"]' - "$base" >/dev/null
    fi
  fi
fi

key="$(
  cd "$root"
  {
    podman image inspect --format '{{.Id}}' "$base"
    find deploy/Containerfile .dockerignore pyproject.toml README.md client server -type f \
      ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
)"
image="localhost/podfit:$key"
if ! podman image exists "$image"; then
  log "building $image on $base"
  mounts=()
  for bundle in /etc/ssl/certs/ca-certificates.crt; do
    [ -f "$bundle" ] && mounts+=(--volume "$bundle:$bundle:ro")
  done
  # --format docker keeps the HEALTHCHECK (OCI image configs have no field for it).
  podman build --format docker --network host "${mounts[@]}" \
    --build-arg "PYTHON_IMAGE=$base" -f "$root/deploy/Containerfile" -t "$image" "$root" >&2
fi
# Each change of the sources makes a new ~0.5 GB image: keep only this one and its base, and drop the
# build stages left untagged.
podman images --format '{{.Repository}}:{{.Tag}}' localhost/podfit | grep -E '^localhost/podfit:[0-9a-f]{16}$' |
  grep -vx "$image" | xargs -r podman rmi >/dev/null 2>&1 || true
podman image prune -f >/dev/null 2>&1 || true
echo "$image"
