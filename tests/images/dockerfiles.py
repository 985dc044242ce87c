"""How the image tests read the Dockerfiles and training/install/image-steps.sh (no Docker
engine here): the build stages, the pins both images share, and what a stage's RUN
instructions execute, each `image-steps.sh STEP` call as the commands of that step."""

import re
from pathlib import Path

from dockerfile_parse import DockerfileParser

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "images"
TRAINING = ROOT / "training"
FRAMEWORKS = {"tensorflow": "TENSORFLOW_VERSION", "pytorch": "TORCH_VERSION"}
STEPS = TRAINING / "install" / "image-steps.sh"
STEP_CALL = re.compile(r"bash /tmp/azdl-install/image-steps\.sh ([\w-]+)")


def step(name: str) -> str:
    """The commands of one step of image-steps.sh: the body of its shell function."""
    match = re.search(rf"^{re.escape(name)}\(\) \{{\n(.*?)^\}}", STEPS.read_text(), re.M | re.S)
    assert match, f"image-steps.sh has no step {name!r}"
    return match.group(1)


def shared_pins() -> dict[str, str]:
    """The pins both images use, as image-steps.sh sets them."""
    return dict(re.findall(r"^([A-Z0-9_]+)=(\S+)$", STEPS.read_text(), re.M))


def executed(items: list[dict]) -> str:
    """What the RUN instructions among `items` execute, each `image-steps.sh STEP` call followed
    by the commands of that step."""
    runs = [i["value"] for i in items if i["instruction"] == "RUN"]
    return " ".join(run + "".join(step(s) for s in STEP_CALL.findall(run)) for run in runs)


def parse(framework: str) -> DockerfileParser:
    return DockerfileParser(path=str(IMAGES / framework / "Dockerfile"))


def stages(framework: str) -> list[list[dict]]:
    """The instructions of each build stage, in order."""
    result: list[list[dict]] = []
    for item in parse(framework).structure:
        if item["instruction"] == "FROM":
            result.append([])
        if result:
            result[-1].append(item)
    return result
