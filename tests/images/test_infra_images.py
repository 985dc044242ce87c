"""The images part of the Pulumi program under the SDK's mocks: build-and-push of both images,
tagged by a hash of their build contexts and pushed without the admin user, and the
prebuilt-image setting."""

import re
import shutil
import urllib.error
import urllib.parse
from pathlib import Path

import pulumi
import pytest

import infra.images as images
import infra.mocks as mocks
from infra.config import ConfigError, load_config, read_stack_file
from infra.dockerignore import context_files, is_ignored, read_patterns

ROOT = Path(__file__).resolve().parents[2]
DEV_STACK = ROOT / "stacks" / "Pulumi.dev.yaml"
IMAGE = "docker-build:index:Image"
ENV_VERSION = "azure-native:machinelearningservices:EnvironmentVersion"
PREBUILT = {
    "tensorflow": "teamregistry.azurecr.io/ml/tensorflow:2.15.1-hvd0.28.1",
    "pytorch": "teamregistry.azurecr.io/ml/pytorch@sha256:" + "ab" * 32,
}
SIG_KEY, SECRET_SIG = "4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270"
ENV_ID = re.compile(
    rf"/subscriptions/{mocks.SUBSCRIPTION_ID}/resourceGroups/azdldev-rg/providers/"
    r"Microsoft\.MachineLearningServices/workspaces/azdldev-mlw/environments/azdl-(\w+)"
    r"/versions/([0-9a-f]{16})"
)


def render(extra: dict | None = None, preview: bool = True):
    return mocks.render({**read_stack_file(DEV_STACK), **(extra or {})}, "dev", preview=preview)


@pytest.fixture(scope="module")
def built():
    return render()


@pytest.fixture(scope="module")
def prebuilt():
    return render({"azdl:images": {"prebuilt": PREBUILT}})


def test_both_images_are_built_from_their_folder_and_training_tagged_by_content(built):
    login_server = built.outputs["registryLoginServer"]
    found = {r.name: r for r in built.of_type(IMAGE)}
    assert sorted(found) == ["pytorch", "tensorflow"]
    for framework, image in found.items():
        inputs = image.inputs
        tag = f"{login_server}/azdl/{framework}:{images.content_hash(framework)}"
        assert inputs["tags"] == [tag]
        assert inputs["push"] is True
        assert inputs["buildOnPreview"] is False
        assert inputs["platforms"] == ["linux/amd64"]
        context = inputs["context"]
        assert Path(context["location"]).resolve() == ROOT / "images" / framework
        assert Path(context["named"]["training"]["location"]).resolve() == ROOT / "training"
        dockerfile = Path(inputs["dockerfile"]["location"])
        assert not dockerfile.is_absolute() and dockerfile.resolve().is_file()


def _credentials(image):
    (credentials,) = image.inputs["registries"]["value"]  # a secret: {sig, value}
    return credentials


def test_a_preview_pushes_nothing_and_never_calls_the_registry(mocker):
    urlopen = mocker.patch("urllib.request.urlopen", side_effect=AssertionError("no network"))
    preview = render(preview=True)
    urlopen.assert_not_called()
    registry = preview.get("azure-native:containerregistry:Registry", "registry")
    assert registry.inputs["adminUserEnabled"] is False
    for image in preview.of_type(IMAGE):
        credentials = _credentials(image)
        assert credentials["address"] == preview.outputs["registryLoginServer"]
        assert credentials["username"] == images.ACR_TOKEN_USER
        assert credentials["password"] is pulumi.UNKNOWN  # exchanged by `pulumi up` only


def test_up_pushes_with_the_deployers_azure_ad_token_exchanged_at_the_registry(mocker):
    response = mocker.MagicMock()
    response.__enter__.return_value.read.return_value = b'{"refresh_token": "acr-refresh"}'
    urlopen = mocker.patch("urllib.request.urlopen", return_value=response)
    up = render(preview=False)
    login_server = up.outputs["registryLoginServer"]
    assert urlopen.called
    request = urlopen.call_args.args[0]
    assert request.full_url == f"https://{login_server}/oauth2/exchange"
    body = dict(urllib.parse.parse_qsl(request.data.decode()))
    assert body["tenant"] == mocks.TENANT_ID
    assert body["access_token"].count(".") == 2  # the Azure AD token (a JWT) from getClientToken
    for image in up.of_type(IMAGE):
        credentials = _credentials(image)
        assert (credentials["username"], credentials["password"]) == (
            images.ACR_TOKEN_USER,
            "acr-refresh",
        )
        # the registries input travels as a secret (the engine's secret signature)
        assert image.inputs["registries"][SIG_KEY] == SECRET_SIG


def test_each_built_image_is_an_environment_version_and_a_stack_output(built):
    envs = {r.inputs["name"]: r for r in built.of_type(ENV_VERSION)}
    assert sorted(envs) == ["azdl-pytorch", "azdl-tensorflow"]
    for framework in ("tensorflow", "pytorch"):
        env = envs[f"azdl-{framework}"]
        version = images.content_hash(framework)
        tag = f"{built.outputs['registryLoginServer']}/azdl/{framework}:{version}"
        # the output pins the push by digest, as the provider reports it
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
    assert prebuilt.of_type(IMAGE) == []
    assert prebuilt.outputs["images"] == PREBUILT
    envs = {r.inputs["name"]: r for r in prebuilt.of_type(ENV_VERSION)}
    for framework, ref in PREBUILT.items():
        env = envs[f"azdl-{framework}"]
        assert env.inputs["properties"]["image"] == ref
        assert prebuilt.outputs["environments"][framework] == env.id
        assert ENV_ID.fullmatch(env.id).groups() == (framework, env.inputs["version"])


def test_a_stack_can_prebuild_one_framework_and_build_the_other():
    mixed = render({"azdl:images": {"prebuilt": {"pytorch": PREBUILT["pytorch"]}}})
    assert [r.name for r in mixed.of_type(IMAGE)] == ["tensorflow"]
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
    monkeypatch.setattr(images, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(images, "IMAGES_DIR", tmp_path / "images")
    monkeypatch.setattr(images, "TRAINING_DIR", tmp_path / "training")
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


# ---- the registry token ----------------------------------------------------------------------


def test_acr_token_exchange_sends_the_ad_token_and_returns_the_refresh_token(mocker):
    response = mocker.MagicMock()
    response.__enter__.return_value.read.return_value = b'{"refresh_token": "acr-refresh"}'
    urlopen = mocker.patch("urllib.request.urlopen", return_value=response)
    token = "header.payload.signature"
    assert images.acr_refresh_token("r.azurecr.io", "tenant-1", token) == "acr-refresh"
    request = urlopen.call_args.args[0]
    assert request.full_url == "https://r.azurecr.io/oauth2/exchange"
    assert dict(urllib.parse.parse_qsl(request.data.decode())) == {
        "grant_type": "access_token",
        "service": "r.azurecr.io",
        "tenant": "tenant-1",
        "access_token": token,
    }


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (
            urllib.error.HTTPError("u", 401, "Unauthorized", {}, None),
            r"r\.azurecr\.io refused .* \(HTTP 401\).*AcrPush",
        ),
        (
            urllib.error.URLError(OSError(-2, "Name or service not known")),
            r"cannot reach the registry r\.azurecr\.io .*Name or service not known.*"
            r"line of sight.*azdl:images\.prebuilt",
        ),
        (TimeoutError("timed out"), r"cannot reach the registry .*timed out.*line of sight"),
    ],
)
def test_acr_token_exchange_failures_say_what_to_do(mocker, error, message):
    mocker.patch("urllib.request.urlopen", side_effect=error)
    with pytest.raises(RuntimeError, match=message):
        images.acr_refresh_token("r.azurecr.io", "tenant-1", "header.payload.signature")


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
