"""The wheel a team pins, used as a team would: built from this checkout, installed into a fresh
virtual environment outside it, and run from a repository `azdl init` made, with no path of the
checkout in sight.

Offline and quick: the wheel is built with `--no-build-isolation` (its build requirements are
pinned in requirements.txt, so the operator environment has them), and installed with
`--no-deps` into a venv made without pip and without the system's site-packages. Its
dependencies come from the operator environment's site-packages, appended to the new venv's
path by a .pth file: a path line in a .pth only joins sys.path, the .pth files in that folder
(the checkout's editable install of azdl) are not run, so `azdl`, `infra`, `policies` and the
rest can only come from the wheel.

One wheel, one venv, one repository: a slow test (three stack renders)."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from azdl.envs import PACKAGES_ROOT as ROOT

pytestmark = pytest.mark.slow

TEAM_RESOURCE = """
from pulumi_azure_native import storage

storage.StorageAccount(
    "team-scratch",
    resource_group_name=azdl.resource_group_name,
    location=azdl.location,
    kind="StorageV2",
    sku=storage.SkuArgs(name="Standard_LRS"),
)
"""


def build_wheel(out: Path) -> Path:
    """`make dist`'s build, into `out`; build/ holds the last build's copies, which setuptools
    would otherwise ship again, so it starts empty."""
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(out), str(ROOT)],
        check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    [wheel] = out.glob("azdl-*.whl")
    return wheel


def fresh_venv(folder: Path, wheel: Path, env: dict[str, str]) -> Path:
    """A venv with the wheel installed and the operator environment's packages behind it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-index", str(wheel)],
        env=env, check=True, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    operator_site = sysconfig.get_paths()["purelib"]
    Path(site, "operator-environment.pth").write_text(operator_site + "\n")
    return folder / "bin"


def served_policies(python: Path, pack: Path, env: dict[str, str]) -> tuple[str, list[str]]:
    """The pack started as Pulumi starts a Python pack (`python -u -m pulumi.policy ENGINE
    PACK_DIR` in its folder: pulumi/pulumi sdk/python/dist/pulumi-analyzer-policy-python), asked
    over gRPC for what it serves (pulumirpc.Analyzer/GetAnalyzerInfo), then stopped."""
    import grpc
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import analyzer_pb2_grpc

    proc = subprocess.Popen(
        [str(python), "-u", "-m", "pulumi.policy", "127.0.0.1:1", str(pack)],
        cwd=pack, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        port = proc.stdout.readline().strip()  # the analyzer's port, once it listens
        if not port.isdigit():
            proc.wait(timeout=30)
            raise AssertionError(f"the pack did not start: {port}{proc.stderr.read()}")
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            info = analyzer_pb2_grpc.AnalyzerStub(channel).GetAnalyzerInfo(
                empty_pb2.Empty(), timeout=60
            )
        return info.name, sorted(p.name for p in info.policies)
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_team_repository_from_the_installed_wheel_plans_checks_and_diffs(tmp_path, shipped_plans):
    # No PYTHONPATH: it names the checkout, whose azdl.egg-info pip would take for azdl installed.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    wheel = build_wheel(tmp_path / "dist")
    bin_dir = fresh_venv(tmp_path / "venv", wheel, env)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    work = tmp_path / "work"
    work.mkdir()

    def azdl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [str(bin_dir / "azdl"), *args], cwd=cwd, env=env, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        assert str(ROOT) not in result.stdout + result.stderr, (args, result.stderr)
        return result

    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import azdl, infra, policies, images; "
         "print(azdl.__file__, infra.__file__, policies.__file__, images.__file__)"],
        cwd=work, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert all(Path(p).is_relative_to(tmp_path / "venv") for p in where), where

    made = azdl("init", "team", cwd=work)
    assert made.returncode == 0, made.stderr
    team = work / "team"
    pin = (team / "requirements.txt").read_text()
    assert pin == f"azdl=={wheel.name.split('-')[1]}\n"

    planned = azdl("plan", "dev", "prod", "--json", cwd=team)
    assert planned.returncode == 0, planned.stderr
    for stack in ("dev", "prod"):
        doc = json.loads((team / "out" / "plan" / f"{stack}.json").read_text())
        assert doc["resources"] == shipped_plans[stack]["resources"], stack
        assert doc["outputs"] == shipped_plans[stack]["outputs"], stack

    checked = azdl("policy", "dev", "prod", cwd=team)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    from policies.rules import POLICIES

    served = served_policies(bin_dir / "python", team / "policy-pack", env)
    assert served == ("azdl", sorted(p.name for p in POLICIES))

    compared = azdl("diff", "dev", "prod", cwd=team)
    assert compared.returncode == 3, compared.stderr  # needs a reviewer (docs/review.md)

    program = team / "__main__.py"
    program.write_text(program.read_text() + TEAM_RESOURCE)
    again = azdl("diff", "out/plan/dev.json", "dev", cwd=team)
    assert again.returncode == 1, again.stderr  # changes, all routine
    assert "1 to create, 0 to update, 0 to replace, 0 to delete" in again.stdout
    assert "+  azure-native:storage:StorageAccount team-scratch" in again.stdout
    replanned = azdl("--project-dir", str(team), "plan", "dev", "--json", cwd=work)
    assert replanned.returncode == 0, replanned.stderr
    keys = {r["key"] for r in json.loads((team / "out" / "plan" / "dev.json").read_text())
            ["resources"]}  # fmt: skip
    shipped = {r["key"] for r in shipped_plans["dev"]["resources"]}
    assert keys - shipped == {"azure-native:storage:StorageAccount::team-scratch"}
