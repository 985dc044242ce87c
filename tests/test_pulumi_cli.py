"""The Pulumi CLI's version, checked by `azdl plan` and `make setup-operator` when a `pulumi` is
on PATH (azdl/pulumi_cli.py): a stand-in `pulumi` answers `pulumi version` as the real CLI does,
`v<semver>` on stdout (pulumi/pulumi pkg/cmd/pulumi/version/version.go; .goreleaser.yml)."""

import os
import subprocess
import sys

import pytest

from azdl import pulumi_cli
from azdl.cli import main


@pytest.fixture
def pulumi_on_path(tmp_path, monkeypatch):
    """Puts a `pulumi` first on PATH whose `pulumi version` prints `printed` (exit `status`)."""

    def install(printed: str, status: int = 0):
        folder = tmp_path / "bin"
        folder.mkdir(exist_ok=True)
        fake = folder / "pulumi"
        fake.write_text(f'#!/bin/sh\n[ "$1" = version ] && echo "{printed}"\nexit {status}\n')
        fake.chmod(0o755)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        return fake

    return install


def test_azdl_plan_says_in_one_line_that_the_cli_is_too_old(pulumi_on_path, capsys):
    fake = pulumi_on_path("v3.150.0")
    assert main(["plan", "nosuchstack"]) == 2  # the check comes first; then the bad stack
    first, *rest = capsys.readouterr().err.splitlines()
    assert first == (
        f"warning: the Pulumi CLI on PATH ({fake}) is v3.150.0; azdl's Pulumi program needs "
        f"Pulumi CLI 3.244.0 or later ({pulumi_cli.NEEDS}): {pulumi_cli.UPGRADE}"
    )
    assert [line for line in rest if "Pulumi CLI" in line] == []


@pytest.mark.parametrize(
    ("printed", "old"),
    [("v3.244.0", False), ("v3.272.0", False), ("v4.0.0", False), ("v3.243.9", True),
     ("v3.244.0-alpha.1", True), ("v3.244.1-dev.0", False), ("3.150.0", True)],
)  # fmt: skip
def test_versions_compare_as_semver_orders_them(pulumi_on_path, printed, old):
    pulumi_on_path(printed)
    line = pulumi_cli.check()
    assert (line is not None) == old, line


def test_no_pulumi_on_path_says_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert pulumi_cli.check() is None


def test_a_cli_that_prints_no_version_is_named(pulumi_on_path):
    fake = pulumi_on_path("error: could not load plugins", status=1)
    line = pulumi_cli.check()
    assert line.startswith(f"warning: `{fake} version` printed no version (error: could not")
    assert "needs Pulumi CLI 3.244.0 or later" in line


def test_make_setup_operator_checks_it_too(pulumi_on_path, tmp_path):
    """The module the script runs, as it runs it (tests/test_completion.py runs the script)."""
    pulumi_on_path("v3.150.0")
    done = subprocess.run([sys.executable, "-m", "azdl.pulumi_cli"], capture_output=True,
                          text=True, env=os.environ)  # fmt: skip
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "is v3.150.0" in done.stderr
