#!/usr/bin/env bash
# Build a minimal Debian base image with python3 when no registry can be reached:
# debootstrap a root file system, then `docker import` it.
#   deploy/build-base-image.sh [TAG]        (default treadle-base:bookworm)
# Environment: SUITE (bookworm: Python 3.11), MIRROR (a Debian mirror).
set -euo pipefail
tag=${1:-treadle-base:bookworm}
suite=${SUITE:-bookworm}
mirror=${MIRROR:-http://deb.debian.org/debian}

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag already exists"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "error: debootstrap is not installed" >&2; exit 1; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  "$suite" "$root" "$mirror"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["python3"]' \
  - "$tag"
echo "built $tag"
