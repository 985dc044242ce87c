#!/usr/bin/env bash
# Create or update the operator environment (.venv) from requirements.txt and install the
# project into it (editable), which puts the `azdl` command in .venv/bin. Idempotent.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv=.venv
stamp=$venv/.setup-stamp
# The last line, whatever was done: the one that puts `azdl` on PATH (the README writes
# .venv/bin/azdl, which works without it). Before it, the Pulumi CLI's version is checked
# (azdl/pulumi_cli.py: the oldest one the program runs under).
on_path() {
    "$venv/bin/python" -m azdl.pulumi_cli # one line on stderr if the pulumi on PATH is too old
    echo "azdl is $PWD/$venv/bin/azdl; to type just azdl, run (or add to ~/.bashrc):"
    echo "export PATH=\"$PWD/$venv/bin:\$PATH\""
}
want=$(cat requirements.txt requirements-runtime.txt pyproject.toml scripts/setup-operator.sh | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "operator environment is up to date ($venv)"
    on_path
    exit 0
fi

python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || python=python3
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
echo "==> installing the pinned operator requirements into $venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip==24.3.1
"$venv/bin/python" -m pip install --quiet -r requirements.txt
"$venv/bin/python" -m pip install --quiet --no-deps -e .
echo "$want" > "$stamp"
echo "operator environment ready ($venv)"
on_path
