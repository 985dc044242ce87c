#!/usr/bin/env bash
# This checkout's training environment, .venv-train (`make setup-training`), made by the script
# an installed azdl ships too (`azdl setup-training` in a team's repository).
#   scripts/setup-training.sh [--check-horovod]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec training/install/setup-training.sh "$@" .venv-train
