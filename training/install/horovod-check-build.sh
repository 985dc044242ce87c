#!/usr/bin/env bash
# Horovod's build check (`horovodrun --check-build`) for the training environment (default
# .venv-train). horovodrun imports TensorFlow to print it, and TensorFlow's C++ start-up lines
# (oneDNN, CPU features; INFO, level 0) would come with it: level 1 keeps warnings and errors
# only, as `azdl train` does (azdl/envs.py). AZDL_VERBOSE=1 shows everything; a
# TF_CPP_MIN_LOG_LEVEL already set wins.
set -euo pipefail
venv=${1:-.venv-train}
if [ "${AZDL_VERBOSE:-}" != 1 ]; then
    export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-1}
fi
exec "$venv/bin/horovodrun" --check-build
