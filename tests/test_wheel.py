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
from dataclasses import dataclass
from pathlib import Path

import pytest

from azdl.envs import PACKAGES_ROOT as ROOT
from azdl.envs import VENV_NAME

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


@dataclass(frozen=True)
class Installed:
    """The wheel installed into a fresh venv (`bin_dir`), run with `env`."""

    wheel: Path
    bin_dir: Path
    env: dict[str, str]

    def azdl(
        self, *args: str, cwd: Path, allowed: Path | None = None
    ) -> subprocess.CompletedProcess:
        """`azdl ARGS` in `cwd`; no path of the checkout in its output but `allowed`'s."""
        result = subprocess.run(
            [str(self.bin_dir / "azdl"), *args], cwd=cwd, env=self.env, capture_output=True,
            text=True, timeout=600,
        )  # fmt: skip
        said = result.stdout + result.stderr
        if allowed is not None:
            said = said.replace(str(allowed), "")
        assert str(ROOT) not in said, (args, result.stderr)
        return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    # No PYTHONPATH: it names the checkout, whose azdl.egg-info pip would take for azdl installed.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    base = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(base / "dist")
    bin_dir = fresh_venv(base / "venv", wheel, env)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return Installed(wheel, bin_dir, env)


def test_a_team_repository_from_the_installed_wheel_plans_checks_and_diffs(
    installed, tmp_path, shipped_plans
):
    wheel, bin_dir, env, azdl = installed.wheel, installed.bin_dir, installed.env, installed.azdl
    work = tmp_path / "work"
    work.mkdir()
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import azdl, infra, policies, images; "
         "print(azdl.__file__, infra.__file__, policies.__file__, images.__file__)"],
        cwd=work, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert all(Path(p).is_relative_to(bin_dir.parent) for p in where), where

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


def purelib(python: Path) -> Path:
    return Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip())  # fmt: skip


@pytest.mark.training_env
def test_a_team_repository_sets_up_its_training_environment_and_trains(installed, tmp_path):
    """`azdl setup-training` in the team's repository, then a 2-worker run there. Its
    .venv-train is a venv whose packages are this checkout's training environment's (a .pth
    path line), with that environment's stamps: the set-up finds nothing to install or build
    (a cold one takes tens of minutes: `make setup-training` runs the same script in CI)."""
    assert installed.azdl("init", "team", cwd=tmp_path).returncode == 0
    team = tmp_path / "team"
    venv, checkout_venv = team / VENV_NAME, ROOT / VENV_NAME
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (purelib(venv / "bin" / "python") / "checkout-training.pth").write_text(
        f"{purelib(checkout_venv / 'bin' / 'python')}\n"
    )
    for stamp in (".requirements-stamp", ".horovod-stamp"):
        shutil.copy(checkout_venv / stamp, venv / stamp)

    setup = installed.azdl("setup-training", cwd=team, allowed=checkout_venv)
    assert setup.returncode == 0, setup.stderr
    assert setup.stdout.splitlines() == [f"training environment ready ({venv})"]
    wheel_training = purelib(installed.bin_dir / "python") / "training"
    assert (venv / "azdl-runtime" / "training").resolve() == wheel_training
    # The workers import azdl's runtime through that link, not from the operator's site-packages.
    path = subprocess.run(
        [str(installed.bin_dir / "python"), "-c",
         "from azdl.envs import training_env; print(training_env()['PYTHONPATH'])"],
        cwd=team / "stacks", env=installed.env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert path == str(venv / "azdl-runtime")

    quick = ["--model", "tiny", "--image-size", "32", "--num-classes", "4", "--warmup-epochs",
             "0", "--batch-size", "4", "--epochs", "1", "--steps-per-epoch", "2"]  # fmt: skip
    trained = installed.azdl("train", "--framework", "torch", "--workers", "2", "--", *quick,
                             cwd=team, allowed=checkout_venv)  # fmt: skip
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert list((team / "runs").glob("torch-*/events/events-*.jsonl")), trained.stdout
