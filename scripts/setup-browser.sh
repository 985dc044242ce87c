#!/usr/bin/env bash
# Chromium, for the test that opens `azdl jobs report --html`'s page in a real browser, headless
# (tests/azure/test_jobs_report.py). Debian's package, as its security updates leave it (an
# exact version would vanish from the mirror); root installs it. Idempotent. `make test` runs it
# after the other set-ups, so that no two apt-get runs meet.
set -euo pipefail
if command -v chromium >/dev/null; then
    echo "chromium is installed ($(command -v chromium))"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "error: chromium is missing and installing it needs root: apt-get install chromium" >&2
    exit 1
fi
echo "==> installing chromium (Debian's package) for the report page's browser test"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
echo "chromium ready ($(command -v chromium))"
