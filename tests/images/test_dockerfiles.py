"""Static checks of the GPU image Dockerfiles (no Docker engine here): hadolint, pinned bases,
copied paths that exist, versions that match the project's pins, what the images contain. The
steps both images run are in training/install/image-steps.sh: a RUN of `image-steps.sh STEP`
is checked as the commands of that step."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from infra.build_context import context_members
from tests.images.dockerfiles import (
    FRAMEWORKS,
    IMAGES,
    STEP_CALL,
    STEPS,
    TRAINING,
    executed,
    parse,
    shared_pins,
    stages,
    step,
)

# The pip distribution each framework image installs for the pin in training/requirements.txt.
FRAMEWORK_PINS = {"tensorflow": "tensorflow-cpu", "pytorch": "torch"}
# The pinned requirements each image leaves out: the local CPU builds it replaces with GPU ones,
# and the other flavour's framework (the PyTorch image has no TensorFlow: issue 13).
EXCLUDED = {"tensorflow": {"tensorflow-cpu", "torch"}, "pytorch": {"torch", "tensorflow-cpu"}}
# What each image installs in place of its excluded pin (same version, GPU build), and beside it
# (torchvision has no CPU build on PyPI, so it is the PyTorch image's alone).
GPU_BUILDS = {"tensorflow": {"tensorflow", "keras"}, "pytorch": {"torch", "torchvision"}}
# Training scripts each image runs, and the Horovod framework flag its build needs.
SCRIPTS = {
    "tensorflow": ("tensorflow.train_keras", "tensorflow.train_loop"),
    "pytorch": ("torch.train", "torch.train_elastic"),
}
HOROVOD_FLAGS = {"tensorflow": "HOROVOD_WITH_TENSORFLOW=1", "pytorch": "HOROVOD_WITH_PYTORCH=1"}
# Import name -> distribution name, for the third-party modules the training code uses.
DISTRIBUTIONS = {
    "PIL": "pillow",
    "yaml": "pyyaml",
    "horovod": "horovod",
    "google_crc32c": "google-crc32c",
    "google": "protobuf",  # google.protobuf (the only google.* namespace package imported)
    "mlflow": "mlflow-skinny",
}


SHARED_STEPS = {
    "build": [
        "build-packages",
        "nccl-topology",
        "nccl-tests",
        "perftest",
        "requirements",
        "horovod",
    ],
    "run": ["run-packages"],
}


def commands(body: str) -> list[str]:
    """The commands of a step's body, one per entry (continued lines joined, comments left out)."""
    joined = re.sub(r"\\\n\s*", "", body)
    return [line.strip() for line in joined.splitlines() if line.strip() and line.strip()[0] != "#"]


def requirement_pins() -> dict[str, str]:
    pins = {}
    for line in (TRAINING / "requirements.txt").read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", line)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def instructions(framework: str, kind: str) -> list[str]:
    return [i["value"] for i in parse(framework).structure if i["instruction"] == kind]


def test_every_framework_has_an_image():
    assert sorted(p.parent.name for p in IMAGES.glob("*/Dockerfile")) == sorted(FRAMEWORKS)


def test_hadolint_passes_with_the_commented_ignore_list():
    config = IMAGES / ".hadolint.yaml"
    text = config.read_text()
    ignored = re.findall(r"^\s*-\s*(DL\d+|SC\d+)", text, re.M)
    assert ignored, "the ignore list is empty or unreadable"
    for rule in ignored:  # every ignored rule has its reason right above it
        assert re.search(rf"#[^\n]*{rule}[^\n]*\n(\s*#.*\n)*\s*-\s*{rule}", text), rule
    hadolint = Path(sys.executable).parent / "hadolint"
    dockerfiles = sorted(str(p) for p in IMAGES.glob("*/Dockerfile"))
    result = subprocess.run(
        [str(hadolint), "--config", str(config), *dockerfiles], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_base_images_are_pinned_and_the_final_stage_is_not_a_build_image(framework):
    dockerfile = parse(framework)
    bases = dockerfile.parent_images
    assert len(bases) >= 2, "multi-stage: build with the devel image, run on a small one"
    for base in bases:
        name, _, tag = base.rpartition(":")
        assert name and tag and tag != "latest" and "/" not in tag, base
        assert "$" not in base, f"{base}: the base must be readable without build arguments"
    assert "devel" not in dockerfile.baseimage, dockerfile.baseimage


def registry_of(image: str) -> str:
    """The registry an image reference pulls from, by Docker's rule: the first path component
    is a registry host only if it has a "." or a ":" or is "localhost"; otherwise Docker Hub
    (docker.io) (distribution/reference, normalize.go, splitDockerDomain)."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_no_base_image_is_pulled_anonymously_from_docker_hub(framework):
    """ACR Tasks' shared agents pull base images anonymously; Docker Hub limits anonymous pulls
    per address. The CUDA bases come from NVIDIA's own registry instead."""
    for base in parse(framework).parent_images:
        assert registry_of(base) == "nvcr.io", base
        assert base.startswith("nvcr.io/nvidia/cuda:"), base


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_copied_paths_exist(framework):
    aliases = [
        item["value"].split()[-1]
        for item in parse(framework).structure
        if item["instruction"] == "FROM" and " AS " in item["value"].upper()
    ]
    copies = instructions(framework, "COPY") + instructions(framework, "ADD")
    assert copies
    for value in copies:
        words = value.split()
        source_from = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), None)
        sources = [w for w in words if not w.startswith("--")][:-1]
        assert sources, value
        if source_from in aliases:
            continue
        # One context, the archive infra/build_context.py sends: what it holds is what exists.
        assert source_from is None, f"{value}: unknown build context {source_from!r}"
        members = [name for name, _ in context_members(framework)]
        for source in sources:
            path = source.rstrip("/")
            assert path in members or any(m.startswith(path + "/") for m in members), (
                f"{value}: {source} is not in the build context"
            )


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_versions_match_the_project_pins(framework):
    args = dict(a.split("=", 1) for a in instructions(framework, "ARG"))
    pins = requirement_pins()
    assert args[FRAMEWORKS[framework]] == pins[FRAMEWORK_PINS[framework]]
    # pip, and the setuptools and wheel Horovod builds with (--no-build-isolation), as the local
    # training environment has them.
    setup = (TRAINING / "install" / "setup-training.sh").read_text()
    for tool in ("pip", "setuptools", "wheel"):
        pinned = re.findall(rf"\b{tool}==([^\s\"']+)", setup)
        assert pinned == [shared_pins()[f"{tool.upper()}_VERSION"]], f"{tool}: setup {pinned}"
    # The image installs the pinned requirements less exactly the CPU framework builds.
    run = " ".join(instructions(framework, "RUN"))
    assert "image-steps.sh requirements /tmp/requirements.txt " in run
    assert "COPY training/requirements.txt /tmp/requirements.txt" in [
        f"COPY {c}" for c in instructions(framework, "COPY")
    ]
    excluded = re.search(r"grep -vE '\^\(([^)]*)\)==' \"\$file\"", step("requirements"))
    assert excluded, "the requirements filter is missing"
    assert set(excluded.group(1).split("|")) == EXCLUDED[framework]
    assert EXCLUDED[framework] <= set(pins)
    # Horovod comes from the project's build script (its version, checksum and C++17 patch),
    # built for this image's framework.
    build = (TRAINING / "install" / "build_horovod.sh").read_text()
    assert "HOROVOD_VERSION=0.28.1" in build
    # CMake: the PyPI package at build_horovod.sh's exact pin (which it checks), installed by
    # the local setup and by the images' horovod step; no CMake from apt.
    assert re.search(r"^CMAKE_VERSION=\d+\.\d+\.\d+$", build, re.M)
    pinned = r"cmake==\$\(sed -n 's/\^CMAKE_VERSION=//p' \S*build_horovod\.sh\"?\)"
    assert re.search(pinned, setup), "setup-training.sh: cmake is not build_horovod.sh's pin"
    assert re.search(pinned, step("horovod")), "image-steps.sh: cmake is not build_horovod.sh's pin"
    assert "cmake" not in step("build-packages").split()
    assert f"image-steps.sh horovod {framework}" in run
    horovod = step("horovod")
    assert 'bash "$here/build_horovod.sh"' in horovod
    flags = re.search(rf"^\s*{framework}\) flags=\"([^\"]*)\"", horovod, re.M).group(1).split()
    assert HOROVOD_FLAGS[framework] in flags
    for flag in ("HOROVOD_GPU_OPERATIONS=NCCL", "HOROVOD_WITH_MPI=1", "$flags"):
        assert flag in horovod, flag


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_run_stage_has_mpi_infiniband_and_the_training_code_and_no_exiting_command(framework):
    final = stages(framework)[-1]
    kinds = [i["instruction"] for i in final]
    assert "CMD" not in kinds and "ENTRYPOINT" not in kinds
    installed = executed(final)
    for package in ("openmpi-bin", "rdma-core", "ibverbs-providers", "openssh-client"):
        assert re.search(rf"\b{package}\b", installed), package
    copies = [i["value"] for i in final if i["instruction"] == "COPY"]
    assert "training/ /opt/azdl/training" in copies
    env = " ".join(i["value"] for i in final if i["instruction"] == "ENV")
    assert "PYTHONPATH=/opt/azdl" in env


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_horovod_builds_and_checks_with_the_cuda_driver_stub_then_drops_it(framework):
    """No GPU driver on the builder: the driver stub is on the loader path for Horovod's build
    and `horovodrun --check-build` (as in Horovod's own GPU Dockerfile), and off again after."""
    assert any(f"image-steps.sh horovod {framework}" in r for r in instructions(framework, "RUN"))
    steps = commands(step("horovod").split("esac\n", 1)[1])  # after picking the flags
    assert steps.pop(0).startswith('/opt/venv/bin/pip install --no-cache-dir "cmake==')
    first, last = steps[0].split(), steps[-1]
    assert first[0] == "ldconfig" and first[1].startswith("/usr/local/cuda/"), steps[0]
    assert first[1].rstrip("/").endswith("/stubs"), steps[0]
    assert last == "ldconfig", "the stub must leave the loader cache after the check"
    check = next(i for i, s in enumerate(steps) if "horovodrun --check-build" in s)
    assert 0 < next(i for i, s in enumerate(steps) if "build_horovod.sh" in s) < check
    assert check < len(steps) - 1


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_host_driver_the_cuda_release_needs_is_documented(framework):
    """NVIDIA's minor-version compatibility: CUDA 12.x needs driver R525+, 13.x R580+."""
    major = re.search(r"nvcr\.io/nvidia/cuda:(\d+)\.", parse(framework).baseimage).group(1)
    driver = {"12": "R525", "13": "R580"}[major]
    text = (IMAGES / framework / "Dockerfile").read_text()
    assert re.search(rf"CUDA {major}\.x needs NVIDIA driver {driver} or newer", text)


def third_party_imports(module: str) -> set[str]:
    """Top-level third-party modules imported by `training.<module>` and the training modules
    it imports, followed transitively."""
    stdlib = set(sys.stdlib_module_names)
    seen, found, todo = set(), set(), [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = TRAINING / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = TRAINING / name.replace(".", "/") / "__init__.py"
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("training"):
                # `from training.x import y`: y may be a submodule (followed) or a name in x
                package = TRAINING.parent / node.module.replace(".", "/")
                names = [
                    f"{node.module}.{a.name}"
                    if (package / f"{a.name}.py").exists() or (package / a.name).is_dir()
                    else node.module
                    for a in node.names
                ]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            for imported in names:
                if imported == "training":  # a name defined in training/__init__.py
                    todo.append("__init__")
                elif imported.startswith("training."):
                    todo.append(imported.removeprefix("training."))
                elif imported.split(".")[0] not in stdlib:
                    found.add(imported.split(".")[0])
    return found


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_image_installs_what_its_training_scripts_import(framework):
    scripts = SCRIPTS[framework]
    for script in scripts:
        assert (TRAINING / (script.replace(".", "/") + ".py")).exists(), script
    installed = set(requirement_pins()) - EXCLUDED[framework]
    installed |= GPU_BUILDS[framework] | {"horovod"}
    if "tensorflow-cpu" in installed:
        installed.add("tensorflow")  # the module tensorflow-cpu provides
    for script in scripts:
        needed = {DISTRIBUTIONS.get(m, m).lower() for m in third_party_imports(script)}
        assert needed <= installed, f"{script} imports {sorted(needed - installed)}"


def test_training_code_needs_nothing_newer_than_the_images_python_3_10():
    """Both images run Ubuntu 22.04's Python 3.10 (TensorFlow 2.15 has no 3.12 wheels), while
    the local environment runs 3.11: the code must stay within 3.10's syntax and library."""
    for framework in FRAMEWORKS:
        assert "ubuntu22.04" in parse(framework).baseimage
    ruff = Path(sys.executable).parent / "ruff"
    result = subprocess.run(
        [str(ruff), "check", "--no-cache", "--isolated", "--target-version", "py310",
         "--select", "E9,F", str(TRAINING)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout
    newer = re.compile(
        r"\btomllib\b|datetime\.UTC\b|import [^\n]*\bUTC\b|\bExceptionGroup\b|\bTaskGroup\b"
        r"|\bStrEnum\b|\bfile_digest\b|typing import [^\n]*\b(Self|LiteralString|NotRequired)\b"
    )
    for path in TRAINING.rglob("*.py"):
        match = newer.search(path.read_text())
        assert match is None, f"{path}: {match.group(0)} is Python 3.11+"


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_build_fails_unless_horovod_reports_nccl_mpi_gloo_and_the_framework(
    framework, tmp_path
):
    """Runs the image's own check (image-steps.sh check-build, which the horovod step runs on
    `horovodrun --check-build`'s report) against reports in Horovod's format: complete, and
    each with one feature missing."""
    horovod = commands(step("horovod"))
    assert "horovodrun --check-build | tee /tmp/check-build.txt" in horovod
    assert 'check-build /tmp/check-build.txt "$framework"' in horovod
    features = [
        "NCCL",
        "MPI",
        "Gloo",
        {"tensorflow": "TensorFlow", "pytorch": "PyTorch"}[framework],
    ]

    def check(enabled: set[str]) -> subprocess.CompletedProcess:
        report = "\n".join(
            f"    [{'X' if name in enabled else ' '}] {name}"
            for name in ("TensorFlow", "PyTorch", "MXNet", "MPI", "Gloo", "NCCL", "DDL", "CCL")
        )
        (tmp_path / "check-build.txt").write_text(f"Horovod v0.28.1:\n\n{report}\n")
        cmd = ["bash", str(STEPS), "check-build", str(tmp_path / "check-build.txt"), framework]
        return subprocess.run(cmd, capture_output=True, text=True)

    assert check(set(features)).returncode == 0
    for missing in features:
        result = check(set(features) - {missing})
        assert result.returncode != 0, missing
        assert result.stderr == f"error: Horovod was built without {missing}\n"


def test_the_images_run_their_shared_steps_from_one_script():
    """Both images COPY image-steps.sh and run each shared step in the stage it belongs to; the
    Dockerfiles install nothing themselves; the script runs only steps it has, and says so."""
    for framework in FRAMEWORKS:
        build, final = stages(framework)[0], stages(framework)[-1]
        for stage, items in (("build", build), ("run", final)):
            copies = [i["value"] for i in items if i["instruction"] == "COPY"]
            assert "training/install/image-steps.sh /tmp/azdl-install/image-steps.sh" in copies
            runs = " ".join(i["value"] for i in items if i["instruction"] == "RUN")
            assert STEP_CALL.findall(runs) == SHARED_STEPS[stage], (framework, stage)
            assert "apt-get" not in runs and "pip install" not in runs, (framework, stage)
    assert subprocess.run(["bash", "-n", str(STEPS)]).returncode == 0
    refused = subprocess.run(["bash", str(STEPS), "nonsense"], capture_output=True, text=True)
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: unknown step 'nonsense'; allowed: build-packages ")


def test_the_pytorch_image_and_flavour_need_no_tensorflow():
    """The PyTorch scripts import nothing of TensorFlow, even inside functions (AST, followed
    through the training modules they import); the image installs none and checks that."""
    for script in SCRIPTS["pytorch"]:
        assert not {"tensorflow", "keras"} & third_party_imports(script), script
    run = " ".join(instructions("pytorch", "RUN"))
    assert '! python -c "import tensorflow"' in run
    pins = requirement_pins()
    installed = set(pins) - EXCLUDED["pytorch"]
    assert not any(name.startswith("tensorflow") for name in installed), installed
    args = dict(a.split("=", 1) for a in instructions("pytorch", "ARG"))
    assert '"torchvision==${TORCHVISION_VERSION}"' in run
    # torchvision's wheel pins its torch exactly: 0.28.x belongs to torch 2.13.x.
    assert args["TORCHVISION_VERSION"].startswith("0.28.") and args["TORCH_VERSION"] == "2.13.0"


# azureml-mlflow 1.62.0.post6's own requirement (its Requires-Dist, as pip's resolver reported it
# on 2026-11-24: "azureml-mlflow 1.62.0.post6 depends on mlflow-skinny<=3.15.0").
AZUREML_MLFLOW = ("1.62.0.post6", "3.15.0")


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_image_sends_metrics_to_azure_ml_with_a_pinned_azureml_mlflow(framework):
    from packaging.version import Version

    version, newest_mlflow = AZUREML_MLFLOW
    assert shared_pins()["AZUREML_MLFLOW_VERSION"] == version
    assert "image-steps.sh requirements /tmp/requirements.txt " in " ".join(
        instructions(framework, "RUN")
    )
    assert '"azureml-mlflow==${AZUREML_MLFLOW_VERSION}"' in step("requirements")
    assert Version(requirement_pins()["mlflow-skinny"]) <= Version(newest_mlflow)
