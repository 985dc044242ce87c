"""The oldest Pulumi CLI the program runs under, and the check of the one on PATH that
`azdl plan` and `make setup-operator` make (docs/deploy.md, "Pulumi CLI version").

The engine features the program uses, each from pulumi/pulumi's CHANGELOG.md (commit 1b59498,
2026-08-21):
- `replace_with` (infra/images.py): 3.207.0, 2025-11-12, "[engine] Add `ReplaceWith` resource
  option" (#20693);
- `on_error` hooks (infra/build_outcome.py): 3.217.0, 2026-01-23, "[engine] Add the `OnError`
  resource hook" (#21291);
- those hooks seeing every provider error: 3.244.0, 2026-05-28, "[engine] Forward all provider
  errors to error hooks for retry" (#23347). Before it the engine passed them partial failures
  only (pkg/resource/deploy/step.go), so a refusal of ACR Tasks or a TaskRun left by an
  interrupted `up`, both plain errors, would end `up` without the hooks' advice.

Run as `python -m azdl.pulumi_cli`, it prints the check's line (if any) and exits 0: the CLI is
the operator's own install, and nothing offline needs it.
"""

import re
import shutil
import subprocess
import sys
from collections.abc import Callable

MINIMUM = (3, 244, 0)
NEEDS = (
    "ReplaceWith from 3.207.0, error hooks from 3.217.0, error hooks on every provider error "
    "from 3.244.0"
)
UPGRADE = "https://www.pulumi.com/docs/install/"
VERSION_TIMEOUT_S = 30
# `pulumi version` prints the build's version, `v<semver>` for a release (pulumi/pulumi
# pkg/cmd/pulumi/version/version.go prints version.Version; .goreleaser.yml sets it to
# `v{{.Env.PULUMI_VERSION}}`).
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


def _text(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def older_than_minimum(printed: str) -> bool | None:
    """Whether the version `pulumi version` printed is below MINIMUM (a pre-release of a version
    is below it, as semver orders them); None when it is not a version."""
    found = _VERSION.match(printed.strip())
    if not found:
        return None
    release = tuple(int(part) for part in found.groups()[:3])
    return release < MINIMUM or (release == MINIMUM and found.group(4) is not None)


def check(which: Callable[[str], str | None] = shutil.which) -> str | None:
    """One line when the `pulumi` on PATH is older than MINIMUM, or does not say its version;
    None when it is recent enough, or when there is none (nothing offline needs it)."""
    path = which("pulumi")
    if path is None:
        return None
    minimum = f"azdl's Pulumi program needs Pulumi CLI {_text(MINIMUM)} or later ({NEEDS})"
    try:
        done = subprocess.run(
            [path, "version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"warning: `{path} version` did not answer ({exc}); {minimum}"
    printed = done.stdout.strip()
    older = older_than_minimum(printed) if done.returncode == 0 else None
    if older is None:
        said = printed or done.stderr.strip() or f"exit status {done.returncode}"
        return f"warning: `{path} version` printed no version ({said.splitlines()[0]}); {minimum}"
    if older:
        return f"warning: the Pulumi CLI on PATH ({path}) is {printed}; {minimum}: {UPGRADE}"
    return None


if __name__ == "__main__":
    line = check()
    if line:
        print(line, file=sys.stderr)
