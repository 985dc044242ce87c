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
# CMake: the PyPI `cmake` package at CMAKE_VERSION below, installed in $PYTHON's environment
# (scripts/setup-training.sh, the images' image-steps.sh and the GPU kit's carry all install
# this pin), so a new CMake release changes nothing here. CMake 4 refuses projects that declare
# a minimum below 3.5, and the Gloo copy inside Horovod 0.28.1 declares 2.8.12
# (third_party/gloo/CMakeLists.txt): CMAKE_POLICY_VERSION_MINIMUM=3.5 in the environment lets
# it configure (https://cmake.org/cmake/help/latest/envvar/CMAKE_POLICY_VERSION_MINIMUM.html,
# added in 4.0; NVIDIA/DALI#5871 builds Horovod the same way, April 2025).
# GCC 13 and newer no longer pull <cstdint> in through other headers, and the Gloo copy relies
# on that (pytorch/gloo#387, #448): every C++ file includes it (CXXFLAGS), on every compiler.
#
# Usage: PYTHON=/path/to/python build_horovod.sh
# HOROVOD_SDIST=/path/to/horovod-0.28.1.tar.gz uses that file instead of downloading it (its
# checksum is verified all the same): benchmarks/gpu/ builds on a machine with no network.
# HOROVOD_WHEEL_DIR=DIR builds a wheel into DIR instead of installing into the environment.
# HOROVOD_PATCHER=patch|patch-ng applies the patch with the `patch` program or with the
# patch-ng Python package (PyPI; for machines without `patch`); default: `patch` if on PATH.
# The HOROVOD_WITH_* / HOROVOD_WITHOUT_* / HOROVOD_GPU_OPERATIONS variables are passed
# through to Horovod's build unchanged.
set -euo pipefail
export CMAKE_POLICY_VERSION_MINIMUM=${CMAKE_POLICY_VERSION_MINIMUM:-3.5}
export CXXFLAGS="${CXXFLAGS:-} -include cstdint"

HOROVOD_VERSION=0.28.1
HOROVOD_SDIST_SHA256=92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0
CMAKE_VERSION=4.4.5
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${PYTHON:-python3}

# The pinned CMake, checked before anything is downloaded or unpacked. Horovod's setup.py runs
# the CMake that HOROVOD_CMAKE names.
HOROVOD_CMAKE=$("$python" -c "
import importlib.util, os, sys
if importlib.util.find_spec('cmake') is None:
    sys.exit('error: $python has no cmake package; Horovod builds with cmake==$CMAKE_VERSION'
             ' (pip install cmake==$CMAKE_VERSION)')
import cmake
print(os.path.join(cmake.CMAKE_BIN_DIR, 'cmake'))
")
found=$("$HOROVOD_CMAKE" --version | head -1)
if [[ $found != "cmake version $CMAKE_VERSION" ]]; then
    echo "error: $HOROVOD_CMAKE is '$found'; Horovod builds with cmake==$CMAKE_VERSION" \
        "(pip install cmake==$CMAKE_VERSION)" >&2
    exit 1
fi
export HOROVOD_CMAKE

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

patcher=${HOROVOD_PATCHER:-}
if [[ -z $patcher ]]; then
    if command -v patch >/dev/null; then patcher=patch; else patcher=patch-ng; fi
fi
echo "==> applying the upstream C++17 change for PyTorch >= 2.1 (horovod#3998) with $patcher"
case $patcher in
    patch) patch -d "$work/horovod-$HOROVOD_VERSION" -p1 < "$here/horovod-0.28.1-torch-cxx17.patch" ;;
    patch-ng)
        if ! "$python" -c "import patch_ng" 2>/dev/null; then
            echo "error: no \`patch\` program and no patch-ng package for $python:" \
                "install either (pip install patch-ng==1.19.1)" >&2
            exit 1
        fi
        "$python" -m patch_ng --quiet -d "$work/horovod-$HOROVOD_VERSION" -p 1 \
            "$here/horovod-0.28.1-torch-cxx17.patch" ;;
    *) echo "error: HOROVOD_PATCHER=$patcher; allowed: patch, patch-ng" >&2; exit 1 ;;
esac

echo "==> building Horovod with $found (several minutes; flags below)"
env | grep -E '^(HOROVOD_|CMAKE_POLICY|CXXFLAGS=)' | sort
if [[ -n ${HOROVOD_WHEEL_DIR:-} ]]; then
    MAKEFLAGS="-j$(nproc)" "$python" -m pip wheel --no-build-isolation --no-cache-dir --no-deps \
        -w "$HOROVOD_WHEEL_DIR" "$work/horovod-$HOROVOD_VERSION"
else
    MAKEFLAGS="-j$(nproc)" "$python" -m pip install --no-build-isolation --no-cache-dir --no-deps \
        "$work/horovod-$HOROVOD_VERSION"
fi
