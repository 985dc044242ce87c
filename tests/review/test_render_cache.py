"""A kept plan is reused only while everything its render read is unchanged: the fingerprints
(azdl/review/render_cache.py), and a real render's recorded inputs."""

import json
import re
import shutil
import subprocess

import pytest

from azdl.envs import PACKAGES_ROOT
from azdl.review import plan, render_cache
from azdl.review.plan import render_stack
from infra import registry

MANIFEST = {"format": "azdl.plan/v1", "project": "azdl", "stack": "qa", "config": {},
            "resources": [], "outputs": {}}  # fmt: skip


@pytest.fixture
def inputs_tree(tmp_path, monkeypatch):
    """A repository in tmp_path: a program file, a folder it lists; and an installed file."""
    repo = tmp_path / "repo"
    (repo / "infra").mkdir(parents=True)
    (repo / "infra" / "program.py").write_text("SIZE = 1\n")
    (repo / "images").mkdir()
    (repo / "images" / "Dockerfile").write_text("FROM x\n")
    outside = tmp_path / "site-packages" / "sdk.py"
    outside.parent.mkdir()
    outside.write_text("VERSION = 1\n")
    monkeypatch.setattr(render_cache, "INSTALLED", (outside.parent,))
    return repo, outside


def kept(tmp_path, repo, outside):
    stack_file = tmp_path / "Pulumi.qa.yaml"
    stack_file.write_text("config: {}\n")
    files = {str(repo / "infra" / "program.py"), str(outside), str(stack_file)}
    inputs = render_cache.fingerprints(files, {str(repo / "images")})
    render_cache.store(stack_file, inputs, MANIFEST, tmp_path / "cache")
    return stack_file


def test_a_kept_plan_is_reused_until_something_it_read_changes(tmp_path, inputs_tree):
    repo, outside = inputs_tree
    stack_file = kept(tmp_path, repo, outside)
    cache = tmp_path / "cache"
    assert render_cache.lookup(stack_file, cache) == MANIFEST
    program = repo / "infra" / "program.py"
    program.write_text("SIZE = 2\n")  # a program source: its content
    assert render_cache.lookup(stack_file, cache) is None
    program.write_text("SIZE = 1\n")
    assert render_cache.lookup(stack_file, cache) == MANIFEST  # content, not time, inside
    (repo / "images" / "Dockerfile.new").write_text("")  # a folder it listed
    assert render_cache.lookup(stack_file, cache) is None
    (repo / "images" / "Dockerfile.new").unlink()
    stack_file.write_text("config: {azdl:x: 1}\n")  # the stack file
    assert render_cache.lookup(stack_file, cache) is None


def test_an_installed_file_counts_by_size_and_time_and_the_environment_counts(
    tmp_path, inputs_tree, monkeypatch
):
    repo, outside = inputs_tree
    stack_file = kept(tmp_path, repo, outside)
    cache = tmp_path / "cache"
    outside.write_text("VERSION = 22\n")  # what a reinstall does: new size and time
    assert render_cache.lookup(stack_file, cache) is None
    stack_file = kept(tmp_path, repo, outside)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "changed")
    assert render_cache.lookup(stack_file, cache) is None


def test_a_damaged_or_other_format_entry_is_no_plan(tmp_path, inputs_tree):
    repo, outside = inputs_tree
    stack_file = kept(tmp_path, repo, outside)
    entry = render_cache.entry_path(stack_file, tmp_path / "cache")
    entry.write_text(entry.read_text()[:100])
    assert render_cache.lookup(stack_file, tmp_path / "cache") is None
    kept(tmp_path, repo, outside)
    entry.write_text(json.dumps(json.loads(entry.read_text()) | {"format": "other/v0"}))
    assert render_cache.lookup(stack_file, tmp_path / "cache") is None


def test_the_program_reads_no_environment_variable_but_the_providers_cloud():
    """The kept plans' environment is the Pulumi runtime's (PULUMI_*) and the provider's cloud
    variables, which the program reads where pulumi-azure-native does: any other variable the
    program read would be an input the fingerprints miss."""
    root = PACKAGES_ROOT
    sources = [*(root / "infra").rglob("*.py"), root / "azdl" / "review" / "render.py"]
    reads = {str(p.relative_to(root)): p.read_text() for p in sources
             if "os.environ" in p.read_text() or "getenv" in p.read_text()}  # fmt: skip
    assert set(reads) == {"infra/registry.py"}
    names = set(re.findall(r"os\.environ\.get\((\w+)\)", reads["infra/registry.py"]))
    assert reads["infra/registry.py"].count("os.environ") == len(names) == 3
    assert {getattr(registry, n) for n in names} == set(render_cache.ENV_NAMES)


def test_a_cloud_variable_is_part_of_a_kept_plans_environment(monkeypatch):
    monkeypatch.delenv("ARM_ENVIRONMENT", raising=False)
    before = render_cache.environment()
    monkeypatch.setenv("ARM_ENVIRONMENT", "usgovernment")
    assert render_cache.environment() != before
    monkeypatch.setenv("UNRELATED_VARIABLE", "x")
    assert render_cache.environment()["env"] == {"ARM_ENVIRONMENT": "usgovernment"} | {
        k: v for k, v in before["env"].items()
    }


def test_the_recorder_sees_files_read_and_folders_listed_not_files_written(tmp_path):
    recorder = render_cache.Recorder()
    (tmp_path / "read.txt").write_text("x")
    recorder("open", (str(tmp_path / "read.txt"), "r", 0))
    recorder("open", (str(tmp_path / "written.txt"), "w", 0))
    recorder("open", (str(tmp_path / "os-open.txt"), None, 1))  # os.open(..., O_WRONLY)
    recorder("os.scandir", (str(tmp_path),))
    recorder("open", (3, "r", 0))  # a descriptor: its file was seen when it was opened
    assert recorder.files == {str(tmp_path / "read.txt")}
    assert recorder.folders == {str(tmp_path)}


@pytest.mark.slow  # renders the dev stack, twice (seconds each)
def test_a_real_render_records_its_inputs_and_a_changed_one_renders_again(tmp_path, monkeypatch):
    monkeypatch.setattr(render_cache, "cache_dir", lambda: tmp_path / "cache")
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    shutil.copy(PACKAGES_ROOT / "stacks" / "Pulumi.dev.yaml", stacks / "Pulumi.dev.yaml")
    first, _ = render_stack("dev", stacks)
    entry = json.loads(render_cache.entry_path(stacks / "Pulumi.dev.yaml", tmp_path / "cache")
                       .read_text())  # fmt: skip
    files = entry["inputs"]["files"]
    root = str(PACKAGES_ROOT)
    for read in ("infra/program.py", "infra/config/stack.py", "infra/vm_sizes.yaml",
                 "images/pytorch/Dockerfile", "training/flavours.py"):  # fmt: skip
        assert files[f"{root}/{read}"].startswith("sha256:"), read
    assert files[str(stacks / "Pulumi.dev.yaml")].startswith("sha256:")
    assert any("/pulumi_azure_native/" in f and v.startswith("stat:") for f, v in files.items())

    calls = []
    real_run = subprocess.run
    monkeypatch.setattr(
        plan.subprocess, "run", lambda *a, **k: calls.append(a) or real_run(*a, **k)
    )
    assert render_stack("dev", stacks, reuse=True)[0] == first and calls == []
    # A program file changed (its recorded fingerprint no longer matches): rendered again.
    program = f"{root}/infra/program.py"
    assert render_cache.unchanged(entry["inputs"])
    assert not render_cache.unchanged(entry["inputs"] | {"files": files | {program: "sha256:0"}})
    # A changed stack file: rendered again, and the new plan says so.
    text = (stacks / "Pulumi.dev.yaml").read_text()
    (stacks / "Pulumi.dev.yaml").write_text(text.replace("maxNodes: 2", "maxNodes: 3"))
    again, _ = render_stack("dev", stacks, reuse=True)
    assert len(calls) == 1 and again["config"]["azdl:cluster"]["maxNodes"] == 3
