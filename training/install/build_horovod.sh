#!/usr/bin/env bash
# Build Horovod 0.28.1 from its source release with the frameworks already installed
# in the current Python environment, and install it there.
#
# Horovod 0.28.1 (June 2023) is its last release. Its PyTorch extension builds as C++14,
# which PyTorch >= 2.1 headers reject. Upstream fixed this on main after the release
# (https://github.com/horovod/horovod/pull/3998: build the extension as C++17 and link
# the C++17 copy of Gloo). horovod-0.28.1-torch-cxx17.patch beside this script applies
# the same change to the release source. Used by the local setup and by the GPU images.
#
# Usage: PYTHON=/path/to/python build_horovod.sh
# HOROVOD_SDIST=/path/to/horovod-0.28.1.tar.gz uses that file instead of downloading it (its
# checksum is verified all the same): benchmarks/gpu/ builds on a machine with no network.
# The HOROVOD_WITH_* / HOROVOD_WITHOUT_* / HOROVOD_GPU_OPERATIONS variables are passed
# through to Horovod's build unchanged.
set -euo pipefail

HOROVOD_VERSION=0.28.1
HOROVOD_SDIST_SHA256=92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${PYTHON:-python3}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [[ -n "${HOROVOD_SDIST:-}" ]]; then  # a machine without network: the release, carried in
    echo "==> using the Horovod $HOROVOD_VERSION source release at $HOROVOD_SDIST"
    cp "$HOROVOD_SDIST" "$work/horovod-$HOROVOD_VERSION.tar.gz"
else
    echo "==> downloading the Horovod $HOROVOD_VERSION source release"
    "$python" -m pip download --quiet --no-deps --no-binary :all: -d "$work" "horovod==$HOROVOD_VERSION"
fi
echo "$HOROVOD_SDIST_SHA256  $work/horovod-$HOROVOD_VERSION.tar.gz" | sha256sum --check --quiet
tar -xzf "$work/horovod-$HOROVOD_VERSION.tar.gz" -C "$work"

echo "==> applying the upstream C++17 change for PyTorch >= 2.1 (horovod#3998)"
patch -d "$work/horovod-$HOROVOD_VERSION" -p1 < "$here/horovod-0.28.1-torch-cxx17.patch"

echo "==> building Horovod (several minutes; HOROVOD_* build flags below)"
env | grep -E '^HOROVOD_' | sort || true
MAKEFLAGS="-j$(nproc)" "$python" -m pip install --no-build-isolation --no-cache-dir --no-deps \
    "$work/horovod-$HOROVOD_VERSION"
