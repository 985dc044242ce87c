#!/usr/bin/env bash
# Create or update a training environment: TensorFlow 2.15, PyTorch, and Horovod built with
# TensorFlow + PyTorch, Gloo + MPI, from the files beside it (the checkout's, or the installed
# azdl's: `azdl setup-training` runs it for a team's repository, `make setup-training` for this
# checkout's .venv-train). Idempotent: pip skips what is already satisfied, and Horovod is
# rebuilt only when its recipe changes (the frameworks, the build tools, build_horovod.sh or its
# patch). The Horovod wheel stays in VENV/horovod-wheel/: the GPU kit's CPU rehearsal
# (benchmarks/gpu/run.sh --smoke) installs it instead of building Horovod a second time.
# VENV/azdl-runtime/training links to azdl's `training` package, which an installed azdl's
# workers import from there (azdl.envs.training_env) rather than from the operator's
# site-packages.
#
#   training/install/setup-training.sh VENV
#   training/install/setup-training.sh --check-horovod VENV   changes nothing: exits 0 if VENV's
#       Horovod was built from this recipe, else says so and exits 1.
set -euo pipefail
usage="usage: setup-training.sh [--check-horovod] VENV"
check=
if [ "${1:-}" = --check-horovod ]; then check=1; shift; fi
case $# in
    1) ;;
    *) echo "error: expected one training environment folder (VENV); $usage" >&2; exit 2 ;;
esac
case $1 in
    -*) echo "error: unknown option '$1'; $usage" >&2; exit 2 ;;
esac
venv=$(realpath -m -- "$1")
# The folder that holds azdl's packages (the checkout, or site-packages): the recipe's files.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

req_stamp=$venv/.requirements-stamp
hvd_stamp=$venv/.horovod-stamp
hvd_wheel=$venv/horovod-wheel

# Horovod builds with --no-build-isolation, so with the environment's own setuptools and
# wheel: pinned, and the GPU images pin the same (tests/images checks); and with the CMake
# that build_horovod.sh pins.
build_tools="setuptools==84.2.1 wheel==0.48.0 cmake==$(sed -n 's/^CMAKE_VERSION=//p' training/install/build_horovod.sh)"
# Horovod's recipe: the exact framework builds in the environment (it is compiled against
# them), the build tools, the build script and its patch.
horovod_recipe() {
    local frameworks
    frameworks=$("$venv/bin/python" -m pip freeze | grep -iE '^(tensorflow-cpu|torch)==' | sort)
    printf '%s\n' "$frameworks" "$build_tools" | cat - training/install/build_horovod.sh \
        training/install/horovod-0.28.1-torch-cxx17.patch | sha256sum | cut -d' ' -f1
}

if [ -n "$check" ]; then
    if [[ ! -x $venv/bin/python || "$(cat "$hvd_stamp" 2>/dev/null)" != "$(horovod_recipe)" ]]; then
        echo "error: the Horovod in $venv was not built from this tree's recipe (the frameworks," \
            "build tools, training/install/build_horovod.sh or its patch): run make setup-training" \
            "(azdl setup-training in a team's repository)" >&2
        exit 1
    fi
    echo "the Horovod in $venv was built from this tree's recipe"
    exit 0
fi

# Open MPI: Azure ML launches Horovod workers with mpirun, so the local build includes MPI too.
if ! command -v mpirun >/dev/null || ! command -v mpicxx >/dev/null; then
    echo "==> installing Open MPI from Debian's packages"
    if [ "$(id -u)" -ne 0 ]; then
        echo "error: Open MPI is missing and installing it needs root: apt-get install openmpi-bin libopenmpi-dev" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
fi

python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"

want_req=$(cat training/requirements.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$req_stamp" 2>/dev/null)" != "$want_req" ]; then
    echo "==> installing the pinned training requirements into $venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip==24.3.1
    "$venv/bin/python" -m pip install --quiet -r training/requirements.txt
    echo "$want_req" > "$req_stamp"
fi

want_hvd=$(horovod_recipe)
if [ "$(cat "$hvd_stamp" 2>/dev/null)" != "$want_hvd" ]; then
    # shellcheck disable=SC2086 # three requirement specifiers
    "$venv/bin/python" -m pip install --quiet $build_tools
    rm -rf "$hvd_wheel"
    HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
    HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_WHEEL_DIR="$hvd_wheel" \
    PYTHON="$venv/bin/python" bash training/install/build_horovod.sh
    "$venv/bin/python" -m pip install --quiet --no-deps --no-index --force-reinstall "$hvd_wheel"/horovod-*.whl
    bash training/install/horovod-check-build.sh "$venv" | tee "$venv/horovod-check-build.txt"
    for feature in TensorFlow PyTorch MPI Gloo; do
        grep -qE "\[X\] $feature" "$venv/horovod-check-build.txt" || {
            echo "error: Horovod was built without $feature" >&2; exit 1; }
    done
    echo "$want_hvd" > "$hvd_stamp"
fi
mkdir -p "$venv/azdl-runtime"
ln -sfn "$PWD/training" "$venv/azdl-runtime/training"
echo "training environment ready ($venv)"
