"""The images part of the Pulumi program under the SDK's mocks: build-and-push of both images,
tagged by content hash and pushed without the admin user, and the prebuilt-image setting."""

import hashlib
import json
import re
import shutil
import urllib.error
from pathlib import Path

import pytest

import infra.images as images
import infra.mocks as mocks
from infra.config import ConfigError, load_config, read_stack_file

ROOT = Path(__file__).resolve().parents[2]
DEV_STACK = ROOT / "stacks" / "Pulumi.dev.yaml"
IMAGE = "docker-build:index:Image"
ENV_VERSION = "azure-native:machinelearningservices:EnvironmentVersion"
PREBUILT = {
    "tensorflow": "teamregistry.azurecr.io/ml/tensorflow:2.15.1-hvd0.28.1",
    "pytorch": "teamregistry.azurecr.io/ml/pytorch@sha256:" + "ab" * 32,
}


class RegistryMocks(mocks.AzureMocks):
    """AzureMocks plus what a registry answers for a pushed image (digest, ref) and the ARM id of
    an Azure ML environment version."""

    def new_resource(self, args):
        resource_id, state = super().new_resource(args)
        if args.typ == IMAGE:
            tag = args.inputs["tags"][0]
            digest = "sha256:" + hashlib.sha256(tag.encode()).hexdigest()
            state.update(digest=digest, ref=f"{tag}@{digest}")
        if args.typ == ENV_VERSION:
            resource_id = (
                f"/subscriptions/{mocks.SUBSCRIPTION_ID}/resourceGroups/"
                f"{args.inputs['resourceGroupName']}/providers/Microsoft.MachineLearningServices/"
                f"workspaces/{args.inputs['workspaceName']}/environments/{args.inputs['name']}"
                f"/versions/{args.inputs['version']}"
            )
            self._local.last.id = resource_id
        return resource_id, state


def render(extra: dict | None = None):
    config = {**read_stack_file(DEV_STACK), **(extra or {})}
    original = mocks.AzureMocks
    mocks.AzureMocks = RegistryMocks
    try:
        return mocks.render(config, "dev")
    finally:
        mocks.AzureMocks = original


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


def test_pushes_use_an_azure_ad_token_not_the_admin_user(built):
    registry = built.get("azure-native:containerregistry:Registry", "registry")
    assert registry.inputs["adminUserEnabled"] is False
    for image in built.of_type(IMAGE):
        (credentials,) = json.loads(json.dumps(image.inputs["registries"]))["value"]
        assert credentials["address"] == built.outputs["registryLoginServer"]
        assert credentials["username"] == images.ACR_TOKEN_USER
        # the offline rendering's stand-in token, passed on without any request being made
        assert credentials["password"] == "offline-rendering-has-no-azure-token"


def test_each_built_image_is_an_environment_version_and_a_stack_output(built):
    envs = {r.inputs["name"]: r for r in built.of_type(ENV_VERSION)}
    assert sorted(envs) == ["azdl-pytorch", "azdl-tensorflow"]
    for framework in ("tensorflow", "pytorch"):
        env = envs[f"azdl-{framework}"]
        ref = built.outputs["images"][framework]
        assert ref.startswith(f"{built.outputs['registryLoginServer']}/azdl/{framework}:")
        assert "@sha256:" in ref
        assert env.inputs["properties"]["image"] == ref
        assert env.inputs["properties"]["osType"] == "Linux"
        assert env.inputs["version"] == images.content_hash(framework)
        assert env.inputs["workspaceName"] == built.outputs["workspaceName"]
        assert built.outputs["environments"][framework] == env.id
        assert env.id.endswith(f"/environments/azdl-{framework}/versions/{env.inputs['version']}")


def test_prebuilt_images_are_registered_as_given_and_nothing_is_built(prebuilt):
    assert prebuilt.of_type(IMAGE) == []
    assert prebuilt.outputs["images"] == PREBUILT
    envs = {r.inputs["name"]: r for r in prebuilt.of_type(ENV_VERSION)}
    for framework, ref in PREBUILT.items():
        assert envs[f"azdl-{framework}"].inputs["properties"]["image"] == ref
        assert prebuilt.outputs["environments"][framework] == envs[f"azdl-{framework}"].id


def test_a_stack_can_prebuild_one_framework_and_build_the_other():
    mixed = render({"azdl:images": {"prebuilt": {"pytorch": PREBUILT["pytorch"]}}})
    assert [r.name for r in mixed.of_type(IMAGE)] == ["tensorflow"]
    assert mixed.outputs["images"]["pytorch"] == PREBUILT["pytorch"]


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
    (tree / "training" / "__pycache__").mkdir(exist_ok=True)
    (tree / "training" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"compiled")
    assert images.content_hash("tensorflow") == first, "byte-code caches are not content"
    for changed in (
        tree / "training" / "requirements.txt",
        tree / "training" / "options.py",
        tree / "images" / "tensorflow" / "Dockerfile",
    ):
        original = changed.read_bytes()
        changed.write_bytes(original + b"\n# changed\n")
        assert images.content_hash("tensorflow") != first, changed
        changed.write_bytes(original)
    assert images.content_hash("tensorflow") == first


def test_acr_token_exchange_sends_the_ad_token_and_returns_the_refresh_token(mocker):
    response = mocker.MagicMock()
    response.__enter__.return_value.read.return_value = b'{"refresh_token": "acr-refresh"}'
    urlopen = mocker.patch("urllib.request.urlopen", return_value=response)
    token = "header.payload.signature"
    assert images.acr_refresh_token("r.azurecr.io", "tenant-1", token) == "acr-refresh"
    request = urlopen.call_args.args[0]
    assert request.full_url == "https://r.azurecr.io/oauth2/exchange"
    body = dict(pair.split("=", 1) for pair in request.data.decode().split("&"))
    assert body == {
        "grant_type": "access_token",
        "service": "r.azurecr.io",
        "tenant": "tenant-1",
        "access_token": token,
    }
    urlopen.reset_mock()
    assert images.acr_refresh_token("r.azurecr.io", "t", "not-a-jwt") == "not-a-jwt"
    urlopen.assert_not_called()
    urlopen.side_effect = urllib.error.HTTPError(request.full_url, 401, "Unauthorized", {}, None)
    with pytest.raises(RuntimeError, match=r"r\.azurecr\.io refused .* \(HTTP 401\).*AcrPush"):
        images.acr_refresh_token("r.azurecr.io", "tenant-1", token)


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
