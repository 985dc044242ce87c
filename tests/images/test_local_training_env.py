"""The local training environment (.venv-train) against the PyTorch image: every Python package
the image's Dockerfile pins (name==version, its steps in image-steps.sh expanded) is installed
locally at the same version, but for the commented differences below; and what the local
environment pins that the image leaves out is exactly the commented local-only set. The local
side is read from .venv-train itself (importlib.metadata in its own interpreter), not from the
files that are meant to build it."""

import json
import re
import subprocess

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.images.dockerfiles import ROOT, TRAINING, executed, shared_pins, stages, step

# Image pins the local environment does not have, each with its reason. An entry whose package
# turns up locally fails the test: then its version is compared like any other.
IMAGE_ONLY = {
    # Azure ML's MLflow plug-in (`azureml://` tracking URIs exist only in a job); locally
    # training.metrics writes to the run folder's SQLite store.
    "azureml-mlflow",
    # No torchvision build for the local CPU torch (2.13.0+cpu) is installable here: PyPI's
    # torchvision 0.28.0 is the CUDA build, and with --no-deps beside the CPU torch it does not
    # import: its _C.so links libtorch_cuda.so and libc10_cuda.so, so its operators never load
    # and `import torchvision` stops at `RuntimeError: operator torchvision::nms does not exist`
    # (torchvision/_meta_registrations.py; measured 2026-11-29 with the registry's
    # torchvision-0.28.0-cp311-cp311-manylinux_2_28_x86_64.whl). The CPU build (0.28.0+cpu) is on
    # PyTorch's own index (download.pytorch.org/whl/cpu), which this machine cannot reach.
    "torchvision",
}
# Local pins the PyTorch image leaves out, each with its reason.
LOCAL_ONLY = {
    # The local environment runs both flavours; TensorFlow is the other image's framework
    # (the PyTorch image checks it has none: issue 13).
    "tensorflow-cpu",
}
# A pinned version in a RUN line or an image step: a literal, a build argument / step variable
# (${NAME}), or the pin another script holds ($(sed -n 's/^NAME=//p' FILE)).
PIN = re.compile(
    r"""(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)==(?:\$\{(?P<var>\w+)\}"""
    r"""|\$\(sed -n 's/\^(?P<sedvar>\w+)=//p' [^)]*?(?P<file>[\w.-]+\.sh)"?\)"""
    r"""|(?P<literal>[^\s"'$]+))"""
)


def script_pins(path) -> dict[str, str]:
    """NAME=VALUE lines of a shell script."""
    return dict(re.findall(r"^([A-Z0-9_]+)=(\S+)$", path.read_text(), re.M))


def requirement_pins(path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", line)
        if match:
            pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def image_pins() -> dict[str, str]:
    """The packages the PyTorch image's build stage (whose /opt/venv the run stage copies)
    installs, with their versions."""
    build = stages("pytorch")[0]
    args = dict(i["value"].split("=", 1) for i in build if i["instruction"] == "ARG")
    variables = {**shared_pins(), **args}
    pins = {}
    for match in PIN.finditer(executed(build)):
        if match["var"]:
            version = variables[match["var"]]
        elif match["sedvar"]:
            version = script_pins(TRAINING / "install" / match["file"])[match["sedvar"]]
        else:
            version = match["literal"]
        pins[canonicalize_name(match["name"])] = version
    # The training requirements less the pattern the requirements step filters out.
    assert "-r /tmp/requirements-image.txt" in step("requirements")
    excluded = re.search(r"grep -vE '\^\(([^)]*)\)=='", step("requirements")).group(1).split("|")
    for name, version in requirement_pins(TRAINING / "requirements.txt").items():
        if name not in excluded:
            pins.setdefault(name, version)
    # Horovod, built from build_horovod.sh's release.
    assert "image-steps.sh horovod pytorch" in executed(build)
    pins["horovod"] = script_pins(TRAINING / "install" / "build_horovod.sh")["HOROVOD_VERSION"]
    return pins


def local_pins() -> dict[str, str]:
    """What the local environment is built from: training/requirements.txt, the tools
    setup-training.sh pins, and Horovod."""
    pins = requirement_pins(TRAINING / "requirements.txt")
    setup = (TRAINING / "install" / "setup-training.sh").read_text()
    for match in PIN.finditer(setup):
        if match["literal"]:
            pins[canonicalize_name(match["name"])] = match["literal"]
    return pins


def installed() -> dict[str, str]:
    """Every distribution in .venv-train with its version, as its own interpreter sees them."""
    python = ROOT / ".venv-train" / "bin" / "python"
    code = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    result = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return {canonicalize_name(k): v for k, v in json.loads(result.stdout).items()}


@pytest.mark.training_env
def test_the_local_environment_has_the_pytorch_images_packages_at_the_same_versions():
    image, local = image_pins(), installed()
    # What the derivation must find, so that a change in how the Dockerfile pins cannot empty it.
    assert {"torch", "torchvision", "azureml-mlflow", "pip", "cmake", "horovod", "numpy"} <= set(
        image
    ), sorted(image)
    for name in IMAGE_ONLY:
        assert name in image, f"{name} is allow-listed as image-only but the image has no pin"
        assert name not in local, (
            f"{name} {local.get(name)} is now installed locally: take it off IMAGE_ONLY"
        )
    # Versions compare as releases: the local torch is the CPU build of the same release
    # (2.13.0+cpu against the image's CUDA 2.13.0), which is the point of the local environment.
    differ = {
        name: (version, local.get(name, "missing"))
        for name, version in image.items()
        if name not in IMAGE_ONLY
        and (name not in local or Version(local[name]).public != Version(version).public)
    }
    assert not differ, f"image pin vs local version: {differ}"


@pytest.mark.training_env
def test_what_only_the_local_environment_pins_is_the_commented_set():
    local = installed()
    only_local = set(local_pins()) - set(image_pins())
    assert only_local == LOCAL_ONLY
    for name in LOCAL_ONLY:
        assert Version(local[name]) == Version(local_pins()[name]), name
