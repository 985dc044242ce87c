#!/usr/bin/env bash
# Install Azurite (the Azure Storage emulator) from package.json into node_modules/.
# The storage tests start it themselves on a free loopback port. Idempotent.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -x node_modules/.bin/azurite ] && [ node_modules/.package-lock.json -nt package.json ]; then
    echo "azurite is up to date (node_modules/.bin/azurite)"
    exit 0
fi
command -v npm >/dev/null || { echo "error: npm is needed for Azurite (apt-get install npm)" >&2; exit 1; }
echo "==> installing Azurite with npm"
if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --loglevel=error
else npm install --no-audit --no-fund --loglevel=error; fi
