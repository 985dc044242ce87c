"""A stack's life under the test engine, as one test: up, up again, a failed build and the `up`
its message names.

Each step runs the whole program for the shipped dev stack, images built by ACR Tasks (not
prebuilt), against the state the step before left: each `up` goes through the engine's steps
(same / update / replace / create, tests/support/mock_engine) and Azure's rules for names and
resource groups (tests/support/subscription.py); the build fails in ACR (RunStatus Failed) after
a change to the image's context; the error names the run's log and the command that builds it
again, and that command does.

What other files render already is not repeated here: the first preview is azdl plan's
(tests/infra/test_preview.py, the create preview of every variant), destroy and up again are
tests/infra/test_redeploy.py's.
"""

import re
import shutil
from pathlib import Path

import pytest

import infra.build_context as build_context
from infra import build_outcome, images
from infra.config import read_stack_file
from tests.support import mock_engine as mocks
from tests.support.subscription import Subscription, SubscriptionMocks

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT / "stacks" / "Pulumi.dev.yaml"
TASK_RUN = "azure-native:containerregistry:TaskRun"
UPLOAD = mocks.DYNAMIC


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A copy of images/ and training/ that the build contexts are read from."""
    shutil.copytree(ROOT / "images", tmp_path / "images")
    shutil.copytree(
        ROOT / "training", tmp_path / "training", ignore=shutil.ignore_patterns("__pycache__")
    )
    monkeypatch.setattr(build_context, "IMAGES_DIR", tmp_path / "images")
    monkeypatch.setattr(build_context, "TRAINING_DIR", tmp_path / "training")
    return tmp_path


def up(subscription: Subscription, **options) -> mocks.Rendering:
    subscription.created = []
    instance = SubscriptionMocks(subscription, **options)
    return mocks.render(read_stack_file(DEV), "dev", mocks=instance)


def failing(framework: str, status: str):
    """ACR's answer: the run of `framework`'s task ends with `status`, the others succeed."""
    return lambda name, _state: status if name == f"{framework}-build" else mocks.SUCCEEDED


def custom(rendering: mocks.Rendering) -> dict[tuple[str, str], mocks.RecordedResource]:
    return {(r.type, r.name): r for r in rendering.resources if r.custom}


@pytest.mark.slow  # five renderings of the dev stack (seconds each)
def test_a_stack_lives_through_up_a_failed_build_and_the_up_that_builds_it_again(tree):
    subscription, status = Subscription(), "Failed"

    # 1. up: everything is created, both images are built
    first = up(subscription)
    assert {r.step for r in custom(first).values()} == {mocks.CREATE}
    assert all("@sha256:" in ref for ref in first.outputs["images"].values())

    # 2. up again: the same inputs, nothing updated or replaced, nothing built. Only the
    # uploads are handed a fresh upload URL and path by ACR on every `up`; their diff ignores
    # both (infra/build_context.py), so they keep the source they uploaded.
    again = up(subscription)
    before = custom(first)
    fresh = {"upload_url", "relative_path"}
    for key, record in custom(again).items():
        assert record.step == mocks.SAME, key
        ignored = fresh if key[0] == UPLOAD else set()
        assert {k: v for k, v in record.inputs.items() if k not in ignored} == {
            k: v for k, v in before[key].inputs.items() if k not in ignored
        }, key
        assert record.state == before[key].state, key
    assert again.outputs == first.outputs

    # 3. the tensorflow image changes, and its build fails in ACR
    dockerfile = tree / "images" / "tensorflow" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "\n# a change\n")
    with pytest.raises(build_outcome.BuildFailed) as failure:
        up(subscription, run_status=failing("tensorflow", status))
    message = str(failure.value)
    failed_run = subscription.state[(TASK_RUN, "tensorflow-build")]
    run_id = failed_run.state["runResult"]["runId"]
    assert f"ended {status}" in message
    registry = first.get("azure-native:resources:Resource", "registry").inputs["resourceName"]
    assert f"az acr task logs -r {registry} --run-id {run_id}" in message
    (named,) = re.findall(r"pulumi up --replace '([^']+)'", message)
    upload = subscription.state[(UPLOAD, "tensorflow-context")]
    assert named == upload.urn

    # 3b. a plain `up` does not build it again: the run's request is what failed
    with pytest.raises(build_outcome.BuildFailed, match=f"ended {status}"):
        up(subscription)

    # 4. the command the message names: a new upload, and the task runs again
    fixed = up(subscription, replace={named})
    steps = {key: r.step for key, r in custom(fixed).items()}
    assert steps[(UPLOAD, "tensorflow-context")] == mocks.REPLACE
    assert steps[(TASK_RUN, "tensorflow-build")] in (mocks.UPDATED, mocks.REPLACE)
    rerun = fixed.get(TASK_RUN, "tensorflow-build").state["runResult"]
    assert rerun["runId"] != run_id and rerun["status"] == mocks.SUCCEEDED
    tag = images.content_hash("tensorflow")
    assert re.search(rf"/azdl/tensorflow:{tag}@sha256:", fixed.outputs["images"]["tensorflow"])
    unchanged = {k for k, s in steps.items() if s == mocks.SAME}
    assert (TASK_RUN, "pytorch-build") in unchanged  # the other image is left alone
