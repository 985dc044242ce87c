#!/usr/bin/env bash
# The docs site, strictly: `make docs` and tests/docs build it with exactly this command, so a
# broken link or a missing page that fails one fails the other. Extra arguments go to mkdocs
# (the tests pass -d DIR, or -f CONFIG for a planted fault). NO_MKDOCS_2_WARNING only hides
# Material's banner about MkDocs 2.0; warnings about the site still print and still abort.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NO_MKDOCS_2_WARNING=1 exec .venv/bin/python -m mkdocs build --strict "$@"
