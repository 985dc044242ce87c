#!/usr/bin/env bash
# Run the whole test suite: the operator side in .venv, the training side in .venv-train.
# Extra arguments go to both pytest runs (e.g. scripts/test.sh -m "not slow").
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

echo "==> operator tests (.venv)"
.venv/bin/python -m pytest tests --ignore=tests/training "$@"
operator=$?
echo "==> training tests (.venv-train)"
.venv-train/bin/python -m pytest tests/training -p no:cacheprovider "$@"
training=$?
# pytest exits 5 when a selection runs no test: not a failure of the suite.
[ $operator -eq 5 ] && operator=0
[ $training -eq 5 ] && training=0
if [ $operator -ne 0 ] || [ $training -ne 0 ]; then
    echo "test suite failed (operator exit $operator, training exit $training)"
    exit 1
fi
