#!/usr/bin/env bash
# Build the treadle image (one image, every role). Wheels are prepared on the host, because
# pip inside `docker build` cannot verify TLS here; the build installs from that folder only.
#   deploy/build-image.sh [TAG]    (default treadle:latest)
# Environment: BASE_IMAGE (default python:3.11-slim; use treadle-base:bookworm, built by
# deploy/build-base-image.sh, where no registry can be reached), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-treadle:latest}
base=${BASE_IMAGE:-python:3.11-slim}
python=${PYTHON:-python3}

rm -rf deploy/wheels
"$python" -m pip wheel --quiet --wheel-dir deploy/wheels .
# The label lets `treadle compare --mode docker` warn when the image is older than the code.
source=$("$python" -c 'from treadle.registry import source_digest; print(source_digest())')
docker build --file deploy/Dockerfile --build-arg "BASE_IMAGE=$base" \
  --label "treadle.source=$source" --tag "$tag" .
echo "built $tag from $base"
