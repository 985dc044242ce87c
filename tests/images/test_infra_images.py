"""The images part of the Pulumi program under the SDK's mocks: both images built in Azure by
ACR Tasks from a context uploaded to ACR's own source storage, tagged by a hash of that context,
`pulumi up` touching neither the stack's registry nor its storage; and the prebuilt-image
setting."""

import gzip
import http.server
import io
import re
import shutil
import socket
import tarfile
import threading
import typing
import urllib.error
import urllib.request
from pathlib import Path

import pulumi
import pytest

import infra.build_context as build_context
import infra.images as images
from infra import build_outcome
from infra.config import ConfigError, load_config, read_stack_file
from infra.dockerignore import context_files, is_ignored, read_patterns
from tests.shipped import STACK_FILES
from tests.support import mock_engine as mocks
from tests.support import renderings

ROOT = Path(__file__).resolve().parents[2]
DEV_STACK, PROD_STACK = STACK_FILES
TASK = "azure-native:containerregistry:Task"
TASK_RUN = "azure-native:containerregistry:TaskRun"
UPLOAD = mocks.DYNAMIC
REGISTRY = "azure-native:resources:Resource"
ENV_VERSION = "azure-native:machinelearningservices:EnvironmentVersion"
PREBUILT = {
    "tensorflow": "teamregistry.azurecr.io/ml/tensorflow:2.15.1-hvd0.28.1",
    "pytorch": "teamregistry.azurecr.io/ml/pytorch@sha256:" + "ab" * 32,
}
ENV_ID = re.compile(
    rf"/subscriptions/{mocks.SUBSCRIPTION_ID}/resourceGroups/azdldev-rg/providers/"
    r"Microsoft\.MachineLearningServices/workspaces/azdldev-mlw-\w+/environments/azdl-(\w+)"
    r"/versions/([0-9a-f]{16})"
)


def render(extra: dict | None = None, stack=DEV_STACK, **kwargs):
    """The stack as `pulumi up` deploys it (mocks.UPDATE unless `mode` says otherwise)."""
    config = {**read_stack_file(stack), **(extra or {})}
    return mocks.render(config, stack.stem.split(".")[1], **kwargs)


@pytest.fixture(scope="module")
def built():
    """The dev stack as deployed: the shared rendering (tests/support/renderings.py)."""
    return renderings.rendered(DEV_STACK)


@pytest.fixture(scope="module")
def prebuilt():
    return render({"azdl:images": {"prebuilt": PREBUILT}})


def test_both_images_are_built_by_acr_tasks_tagged_by_content(built):
    registry = built.get(REGISTRY, "registry")
    tasks = {r.name: r for r in built.of_type(TASK)}
    runs = {r.name: r for r in built.of_type(TASK_RUN)}
    assert sorted(runs) == ["pytorch-build", "tensorflow-build"]
    uploads = {r.name: r for r in built.of_type(UPLOAD)}
    for framework in ("pytorch", "tensorflow"):
        task, run = tasks[f"{framework}-task"], runs[f"{framework}-build"]
        upload = uploads[f"{framework}-context"].inputs
        version = images.content_hash(framework)
        assert task.inputs["registryName"] == registry.inputs["resourceName"]
        assert run.inputs["registryName"] == registry.inputs["resourceName"]
        step = task.inputs["step"]
        assert step["type"] == "Docker" and step["dockerFilePath"] == "Dockerfile"
        assert step["imageNames"] == [f"azdl/{framework}:{version}"]
        assert step["isPushEnabled"] is True
        assert task.inputs["platform"] == {"os": "Linux", "architecture": "amd64"}
        # the run runs this task on what the upload sent; the upload is keyed by content
        request = run.inputs["runRequest"]
        assert request["type"] == "TaskRunRequest" and request["taskId"] == task.id
        assert request["overrideTaskStepProperties"]["contextPath"] == upload["relative_path"]
        assert step["contextPath"] == upload["relative_path"]
        assert upload["content_hash"] == version and upload["framework"] == framework
    assert "docker-build:index:Image" not in {r.type for r in built.resources}


def test_dev_and_prod_build_the_same_way(built):
    prod = renderings.rendered(PROD_STACK)
    for rendering in (built, prod):
        assert {r.name for r in rendering.of_type(TASK_RUN)} == {
            "pytorch-build",
            "tensorflow-build",
        }
        registry = rendering.get(REGISTRY, "registry").inputs
        assert registry["properties"]["networkRuleBypassAllowedForTasks"] is True
        assert registry["properties"]["adminUserEnabled"] is False
    assert prod.get(REGISTRY, "registry").inputs["properties"]["publicNetworkAccess"] == "Disabled"


# The Azure Landing Zones bootstrap module's build into a network-restricted registry
# (Azure/accelerator-bootstrap-modules, modules/azure/container_registry.tf, commit
# 06e612ce35e1367ebc93b5ed6182fe5703479663): a task with a system-assigned identity, its registry
# credential for the registry's login server set to that identity ("[system]"), AcrPush for the
# task's principal on the registry, and a run that waits for that role assignment. "Manage
# network bypass policy for tasks" (ms.date 2025-05-15): only runs authenticating with the task's
# system-assigned identity pass the bypass.
LANDING_ZONES_SYSTEM_IDENTITY = "[system]"
ACR_PUSH = "8311e382-0749-4cb8-b61a-304f252e45ec"  # built-in-roles, Containers


@pytest.mark.parametrize("stack", [DEV_STACK, PROD_STACK], ids=["dev", "prod"])
def test_each_build_is_a_task_with_its_own_identity_that_may_push(built, stack):
    rendering = built if stack == DEV_STACK else renderings.rendered(PROD_STACK)
    registry = rendering.get(REGISTRY, "registry")
    login_server = rendering.outputs["registryLoginServer"]
    assignments = rendering.of_type("azure-native:authorization:RoleAssignment")
    for framework in ("pytorch", "tensorflow"):
        task = rendering.get(TASK, f"{framework}-task")
        run = rendering.get(TASK_RUN, f"{framework}-build")
        assert task.inputs["identity"] == {"type": "SystemAssigned"}
        assert "identity" not in run.inputs  # the run authenticates as its task
        assert task.inputs["credentials"] == {
            "customRegistries": {login_server: {"identity": LANDING_ZONES_SYSTEM_IDENTITY}}
        }
        principal = task.state["identity"]["principalId"]
        (push,) = [a for a in assignments if a.inputs["principalId"] == principal]
        assert push.inputs["roleDefinitionId"].endswith(f"/roleDefinitions/{ACR_PUSH}")
        assert push.inputs["scope"] == registry.id
        assert push.inputs["principalType"] == "ServicePrincipal"
        assert push.urn in run.dependencies  # the run starts once the role is assigned


def _minutes(duration: str) -> int:
    return int(re.fullmatch(r"(\d+)m", duration).group(1))


def test_pulumi_waits_for_a_run_longer_than_the_build_may_take(built):
    """The task's timeout is within the API's range (300-28800 s, default 3600: ARM spec
    containerregistry_build.json 2019-06-01-preview, TaskProperties.timeout); Pulumi waits
    longer than that for the run (azure-native's own default is 120 min: provider.go,
    azureContext)."""
    for framework in ("pytorch", "tensorflow"):
        task = built.get(TASK, f"{framework}-task")
        run = built.get(TASK_RUN, f"{framework}-build")
        timeout = task.inputs["timeout"]
        assert 300 <= timeout <= 28800 and timeout > 3600
        for operation in ("create", "update"):
            assert _minutes(run.custom_timeouts[operation]) * 60 > timeout


def test_the_upload_task_and_run_are_replaced_with_the_registry(built):
    """`replace_with`: "this resource will also be replaced whenever any of the provided
    resources are replaced" (pulumi.ResourceOptions): a re-created registry gets its images
    built and pushed again, not a state that says they are there."""
    registry = built.get(REGISTRY, "registry").urn
    for framework in ("pytorch", "tensorflow"):
        for token, name in ((UPLOAD, "context"), (TASK, "task"), (TASK_RUN, "build")):
            assert built.get(token, f"{framework}-{name}").replace_with == [registry]
        run = built.get(TASK_RUN, f"{framework}-build")
        upload = built.get(UPLOAD, f"{framework}-context")
        # one run per upload: a new upload runs the task again
        assert run.inputs["forceUpdateTag"] == upload.state["relative_path"]


# What Azure answers a subscription that may not use ACR Tasks (Azure-Samples/
# azure-search-openai-demo#2592, 2025-07-02: a free-trial subscription's scheduleRun).
REFUSED = (
    'RESPONSE 400: 400 Bad Request\nERROR CODE: TasksOperationsNotAllowed\n{"error": {"code": '
    '"TasksOperationsNotAllowed", "message": "ACR Tasks requests for the registry r1 and '
    "0000 are not permitted. Please file an Azure support request at "
    'http://aka.ms/azuresupport for assistance.", "target": "request"}}'
)


def _failed(errors):
    return pulumi.ErrorHookArgs("urn", "", "tensorflow-task", TASK, errors=errors)


def test_a_subscription_that_refuses_acr_tasks_gets_one_plain_message(built, monkeypatch):
    logged = []
    monkeypatch.setattr(pulumi.log, "error", lambda message, *a, **k: logged.append(message))
    assert build_outcome.explain_refused_tasks(_failed([REFUSED])) is False  # never retried
    assert logged == [build_outcome.TASKS_REFUSED_MESSAGE]
    assert "azdl:images.prebuilt" in logged[0] and logged[0].startswith("error: ")
    logged.clear()
    assert build_outcome.explain_refused_tasks(_failed(["QuotaExceeded"])) is False
    assert logged == []  # other failures of the task speak for themselves
    # the run's own hook (tests/infra/test_build_failure.py) says the same for a refusal
    assert build_outcome.run_error_advice(_failed([REFUSED]), "urn") == (
        build_outcome.TASKS_REFUSED_MESSAGE
    )
    for framework in ("pytorch", "tensorflow"):
        task = built.get(TASK, f"{framework}-task")
        assert task.error_hooks == ["azdl-acr-tasks-refused"]
        run = built.get(TASK_RUN, f"{framework}-build")
        assert run.error_hooks == [f"azdl-{framework}-build-failed"]


class _SourceStore(http.server.BaseHTTPRequestHandler):
    """Stands in for ACR Tasks' source upload storage: keeps what is PUT."""

    received: typing.ClassVar[list[tuple[str, dict, bytes]]] = []

    def do_PUT(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args):
        pass


STACK_HOSTS = re.compile(r".*\.(azurecr\.io|(blob|file|dfs|queue|table)\.core\.windows\.net)$")


@pytest.fixture
def network_guard(monkeypatch):
    """Refuses every connection but the local stand-in for ACR's source upload storage, and
    records what was attempted: the stack's registry (*.azurecr.io) and storage
    (*.core.windows.net) above all."""
    attempts: list[str] = []
    real = socket.create_connection

    def guarded(address, *args, **kwargs):
        host = address[0]
        if host != "127.0.0.1":
            attempts.append(host)
            kind = "the stack's registry or storage" if STACK_HOSTS.match(host) else "a host"
            raise ConnectionRefusedError(f"refused by the test: {host} is {kind}")
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", guarded)
    return attempts


@pytest.fixture
def source_store():
    _SourceStore.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SourceStore)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/source", _SourceStore.received
    server.shutdown()


@pytest.mark.slow  # renders the program (seconds)
def test_up_completes_with_the_stacks_registry_and_storage_unreachable(network_guard, source_store):
    """A prod `pulumi up` (an update, not a preview) from outside the VNet: the only bytes
    that leave are the build contexts, PUT to the upload URL the registry's control plane
    handed out; nothing connects to the stack's registry or storage accounts."""
    endpoint, received = source_store
    up = render(stack=PROD_STACK, upload_endpoint=endpoint)
    assert network_guard == []
    # the guard is real: the stack's registry and storage would have been refused
    for host in (
        up.outputs["registryLoginServer"],
        f"{up.outputs['outputsAccountName']}.blob.core.windows.net",
    ):
        with pytest.raises(urllib.error.URLError, match="refused by the test"):
            urllib.request.urlopen(f"https://{host}/", timeout=5)
    assert len(network_guard) == 2
    uploads = {r.name.removesuffix("-context"): r for r in up.of_type(UPLOAD)}
    assert len(received) == 2
    for path, headers, body in received:
        assert headers["x-ms-blob-type"] == "BlockBlob"  # Put Blob of a block blob
        framework = next(
            f
            for f, u in uploads.items()
            if path.startswith("/source/" + u.inputs["relative_path"].removeprefix("source/mock/"))
        )
        assert body == build_context.archive(framework)
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(body))) as tar:
            names = tar.getnames()
        assert "Dockerfile" in names and "training/requirements.txt" in names
        assert (
            uploads[framework].state["relative_path"] == uploads[framework].inputs["relative_path"]
        )
    for framework in ("pytorch", "tensorflow"):
        ref = up.outputs["images"][framework]
        tag = (
            f"{up.outputs['registryLoginServer']}/azdl/{framework}:{images.content_hash(framework)}"
        )
        assert re.fullmatch(re.escape(tag) + r"@sha256:[0-9a-f]{64}", ref)


def test_an_unchanged_context_is_neither_uploaded_nor_rebuilt_again():
    """The upload's diff (what Pulumi asks a dynamic provider on every `up`) ignores the fresh
    upload URL; only a new content hash replaces it, and only then does the run's source change."""
    provider = build_context._SourceUploadProvider()
    old = {
        "framework": "tensorflow",
        "content_hash": "a" * 16,
        "upload_url": "https://x/1",
        "relative_path": "source/1.tar.gz",
    }
    same = provider.diff(
        "source/1.tar.gz",
        old,
        {**old, "upload_url": "https://x/2", "relative_path": "source/2.tar.gz"},
    )
    assert same.changes is False and not same.replaces
    changed = provider.diff("source/1.tar.gz", old, {**old, "content_hash": "b" * 16})
    assert changed.changes is True and changed.replaces == ["content_hash"]


URN = "urn:pulumi:dev::azdl::azdl:infra:TrainingImages$pulumi-python:dynamic:Resource::tf"
TAG = "r.azurecr.io/azdl/tensorflow:abc"


def ref(result, preview=False):
    return build_outcome.built_ref("r.azurecr.io", result, TAG, URN, preview=preview)


@pytest.mark.parametrize("status", build_outcome.FAILED_RUN)
def test_a_failed_or_cancelled_build_stops_up_and_says_what_to_run(status):
    """Every RunStatus that ends without an image (ARM spec 2019-06-01-preview, RunStatus):
    the run's log, and the one command that builds it again (tests/infra/test_stack_life.py
    runs that command), in a preview too."""
    for preview in (False, True):
        with pytest.raises(build_outcome.BuildFailed) as failure:
            ref({"status": status, "runId": "cb12", "outputImages": []}, preview)
        message = str(failure.value)
        assert f"ended {status}" in message
        assert "`az acr task logs -r r --run-id cb12`" in message
        assert f"`pulumi up --replace '{URN}'`" in message


@pytest.mark.parametrize("status", ["Queued", "Started", "Running", None])
def test_outside_a_preview_only_a_run_that_succeeded_is_built(status):
    """A run not yet ended (or with no result) is no image to register: outside a preview it
    stops `up` with what to do; in a preview, where no run has happened, the tag stands in."""
    result = {"status": status, "runId": "cb12", "outputImages": []}
    assert ref(result, preview=True) == TAG
    with pytest.raises(build_outcome.BuildFailed) as failure:
        ref(result)
    message = str(failure.value)
    if status is None:
        assert f"pulumi up --replace '{URN}'" in message
    else:
        assert f"is still {status}" in message and "`pulumi refresh`" in message
        assert "`az acr task logs -r r --run-id cb12`" in message


def test_a_run_that_succeeded_gives_the_pushed_digest_and_none_other():
    pushed = {"repository": "azdl/tensorflow", "tag": "abc", "digest": "sha256:" + "1" * 64}
    done = {"status": "Succeeded", "runId": "cb12", "outputImages": [pushed]}
    assert ref(done) == f"{TAG}@sha256:{'1' * 64}"
    other = {**done, "outputImages": [{**pushed, "tag": "old"}]}
    with pytest.raises(build_outcome.BuildFailed, match="Succeeded but reports no such image"):
        ref(other)


def test_the_context_archive_is_reproducible_and_what_the_tag_hashes():
    first = build_context.archive("tensorflow")
    assert build_context.archive("tensorflow") == first
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        members = tar.getnames()
    assert members == [name for name, _ in build_context.context_members("tensorflow")]
    assert ".dockerignore" not in members and "training/.dockerignore" not in members


def test_each_built_image_is_an_environment_version_and_a_stack_output(built):
    envs = {r.inputs["name"]: r for r in built.of_type(ENV_VERSION)}
    assert sorted(envs) == ["azdl-pytorch", "azdl-tensorflow"]
    for framework in ("tensorflow", "pytorch"):
        env = envs[f"azdl-{framework}"]
        version = images.content_hash(framework)
        tag = f"{built.outputs['registryLoginServer']}/azdl/{framework}:{version}"
        # the output pins the build by digest, as the run reports it
        assert re.fullmatch(
            re.escape(tag) + r"@sha256:[0-9a-f]{64}", built.outputs["images"][framework]
        )
        # the environment version registers the content-addressed tag with the same hash:
        # a rebuild with a new digest never asks Azure to change an immutable version
        assert env.inputs["properties"]["image"] == tag
        assert env.inputs["version"] == version
        assert env.inputs["properties"]["osType"] == "Linux"
        assert env.inputs["workspaceName"] == built.outputs["workspaceName"]
        assert built.outputs["environments"][framework] == env.id
        assert ENV_ID.fullmatch(env.id).groups() == (framework, version)


def test_prebuilt_images_are_registered_as_given_and_nothing_is_built(prebuilt):
    assert prebuilt.of_type(TASK_RUN) == [] and prebuilt.of_type(UPLOAD) == []
    assert prebuilt.outputs["images"] == PREBUILT
    envs = {r.inputs["name"]: r for r in prebuilt.of_type(ENV_VERSION)}
    for framework, ref in PREBUILT.items():
        env = envs[f"azdl-{framework}"]
        assert env.inputs["properties"]["image"] == ref
        assert prebuilt.outputs["environments"][framework] == env.id
        assert ENV_ID.fullmatch(env.id).groups() == (framework, env.inputs["version"])


@pytest.mark.slow  # renders the program (seconds)
def test_a_stack_can_prebuild_one_framework_and_build_the_other():
    mixed = render({"azdl:images": {"prebuilt": {"pytorch": PREBUILT["pytorch"]}}})
    assert [r.name for r in mixed.of_type(TASK_RUN)] == ["tensorflow-build"]
    assert mixed.outputs["images"]["pytorch"] == PREBUILT["pytorch"]
    assert "@sha256:" in mixed.outputs["images"]["tensorflow"]
    assert set(mixed.outputs["environments"]) == {"tensorflow", "pytorch"}


# ---- the tag: what the build contexts send ----------------------------------------------------


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A copy of images/tensorflow and training/ that content_hash reads instead."""
    shutil.copytree(ROOT / "images" / "tensorflow", tmp_path / "images" / "tensorflow")
    shutil.copytree(
        ROOT / "training", tmp_path / "training", ignore=shutil.ignore_patterns("__pycache__")
    )
    monkeypatch.setattr(build_context, "IMAGES_DIR", tmp_path / "images")
    monkeypatch.setattr(build_context, "TRAINING_DIR", tmp_path / "training")
    return tmp_path


def test_same_content_gives_the_same_tag_and_any_change_a_new_one(tree):
    first = images.content_hash("tensorflow")
    assert images.content_hash("tensorflow") == first
    for leftover in (
        "training/__pycache__/x.cpython-311.pyc",
        "training/data/prepare/__pycache__/convert.cpython-311.pyc",
        "training/.pytest_cache/v/cache/lastfailed",
        "training/options.py~",
        "images/tensorflow/.ruff_cache/0.17/123",
    ):
        (tree / leftover).parent.mkdir(parents=True, exist_ok=True)
        (tree / leftover).write_bytes(b"not content")
    assert images.content_hash("tensorflow") == first, "caches are not content"
    for changed in (
        tree / "training" / "requirements.txt",
        tree / "training" / "options.py",
        tree / "training" / "install" / "build_horovod.sh",
        tree / "images" / "tensorflow" / "Dockerfile",
    ):
        original = changed.read_bytes()
        changed.write_bytes(original + b"\n# changed\n")
        assert images.content_hash("tensorflow") != first, changed
        changed.write_bytes(original)
    assert images.content_hash("tensorflow") == first
    # a file Docker would send goes into the image, so into the tag, tracked by git or not
    (tree / "training" / "scratch.py").write_text("x = 1\n")
    assert images.content_hash("tensorflow") != first


def test_every_build_context_has_an_ignore_file_and_the_tag_reads_it(tree):
    for context in (*(ROOT / "images" / fw for fw in ("tensorflow", "pytorch")), ROOT / "training"):
        patterns = {p.text for p in read_patterns(context)}
        assert {"**/__pycache__", "**/*.pyc", "**/.pytest_cache"} <= patterns, context
    first = images.content_hash("tensorflow")
    (tree / "training" / "notes.md").write_text("local notes\n")
    assert images.content_hash("tensorflow") != first
    ignore = tree / "training" / ".dockerignore"
    ignore.write_text(
        ignore.read_text() + "notes.md\n"
    )  # Docker now leaves it out: so does the tag
    assert images.content_hash("tensorflow") == first


@pytest.mark.parametrize(
    ("patterns", "path", "ignored"),
    [
        ("**/__pycache__", "__pycache__/a.pyc", True),
        ("**/__pycache__", "pkg/sub/__pycache__/a.pyc", True),  # a folder takes its contents
        ("*.pyc", "a.pyc", True),
        ("*.pyc", "pkg/a.pyc", False),  # unlike .gitignore, * stays at the context root
        ("**/*.pyc", "pkg/a.pyc", True),
        ("pkg/*/x", "pkg/a/x", True),
        ("pkg/*/x", "pkg/a/b/x", False),
        ("pkg/**/x", "pkg/a/b/x", True),
        ("/build", "build/out.o", True),
        ("?.txt", "a.txt", True),
        ("?.txt", "ab.txt", False),
        ("docs\n!docs/keep.md", "docs/keep.md", False),  # ! re-includes
        ("docs\n!docs/keep.md", "docs/drop.md", True),
        ("!docs/keep.md\ndocs", "docs/keep.md", True),  # the last match wins
        ("# a comment\n\n  data  ", "data/x", True),
    ],
)
def test_ignore_patterns_follow_dockers_rules(tmp_path, patterns, path, ignored):
    (tmp_path / ".dockerignore").write_text(patterns + "\n")
    assert is_ignored(path, read_patterns(tmp_path)) is ignored


def test_context_files_leave_out_what_the_ignore_file_excludes(tmp_path):
    for name in ("Dockerfile", "a/keep.py", "a/__pycache__/keep.pyc", ".dockerignore"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    (tmp_path / ".dockerignore").write_text("**/__pycache__\n.dockerignore\n")
    assert [p.relative_to(tmp_path).as_posix() for p in context_files(tmp_path)] == [
        "Dockerfile",
        "a/keep.py",
    ]


def test_character_classes_are_refused_not_approximated(tmp_path):
    (tmp_path / ".dockerignore").write_text("*.py[co]\n")
    with pytest.raises(ValueError, match=r"\.dockerignore: pattern '\*\.py\[co\]': character"):
        read_patterns(tmp_path)


# ---- settings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prebuilt", "message"),
    [
        (
            {"jax": "r.azurecr.io/x:1"},
            "images.prebuilt.jax = 'jax' is invalid: allowed: tensorflow",
        ),
        ({"pytorch": "r.azurecr.io/x:latest"}, "a pinned tag or digest, not :latest"),
        ({"pytorch": "r.azurecr.io/x"}, "an image ref with registry, tag or digest"),
        ({"pytorch": "x:1"}, "an image ref with registry, tag or digest"),
        ({"pytorch": 3}, "an image ref with registry, tag or digest"),
    ],
)
def test_bad_prebuilt_refs_stop_the_program_before_anything_is_declared(prebuilt, message):
    config = {**read_stack_file(DEV_STACK), "azdl:images": {"prebuilt": prebuilt}}
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(config, stack="dev")


def test_unknown_image_settings_are_refused():
    config = {**read_stack_file(DEV_STACK), "azdl:images": {"prebuild": {}}}
    with pytest.raises(
        ConfigError, match=r"azdl:images\.prebuild = .* unknown key; known: prebuilt"
    ):
        load_config(config, stack="dev")
