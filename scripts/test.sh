#!/usr/bin/env bash
# Run the whole test suite: the operator side in .venv and the training side in .venv-train, at
# the same time. The training side spends much of its time in multi-process runs that wait on
# each other (rendezvous, timeouts, a stalled rank on purpose), which leaves CPU for the operator
# side; run in turn, `make test` took 42 minutes in CI on 2026-11-26, near its 45-minute budget.
# The operator side's output goes to out/test-operator.log and is printed when both are done.
# Extra arguments go to both pytest runs (e.g. scripts/test.sh -m "not slow").
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mkdir -p out
log=out/test-operator.log
echo "==> operator tests (.venv), alongside the training tests; output: $log"
.venv/bin/python -m pytest tests --ignore=tests/training --durations=15 "$@" >"$log" 2>&1 &
operator_pid=$!
# Stop the background run too if this script is interrupted.
trap 'kill "$operator_pid" 2>/dev/null' INT TERM
echo "==> training tests (.venv-train)"
.venv-train/bin/python -m pytest tests/training -p no:cacheprovider --durations=15 "$@"
training=$?
echo "==> waiting for the operator tests"
wait "$operator_pid"
operator=$?
echo "==> operator tests (.venv): $log"
cat "$log"
# pytest exits 5 when a selection runs no test: not a failure of the suite.
[ $operator -eq 5 ] && operator=0
[ $training -eq 5 ] && training=0
if [ $operator -ne 0 ] || [ $training -ne 0 ]; then
    echo "test suite failed (operator exit $operator, training exit $training)"
    exit 1
fi
