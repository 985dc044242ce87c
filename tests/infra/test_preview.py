"""`pulumi preview` as pulumi-azure-native answers it, before the first `up` and before an update.

`azdl plan` renders under `infra.mocks.PreviewMocks`, whose preview follows the provider's own
source: `provider/pkg/convert/previewOutputs.go` (pulumi/pulumi-azure-native, commit
604cfd525f965477da629fdb2474063bdce7d798) and `Create` in `provider/pkg/provider/provider.go`
(commit 006a62afe453b416e5d5c98d2d91c4c7281f52f9); the test engine's preview of a create is the
same class, and its preview of an update adds `Update`'s stable outputs. The first tests hold
the preview to those rules; the rest render the whole program in both preview modes for every
shipped stack and the landing-zone and operators variants, and plant the read that a real first
preview meets, in `azdl plan` itself.
"""

import copy
import functools
import os

import pulumi
import pytest

from azdl.cli import main
from azdl.envs import PACKAGES_ROOT
from infra import registry
from infra.config import ConfigError, read_stack_file
from infra.mocks import preview_outputs
from tests.shipped import STACK_FILES
from tests.support import mock_engine as mocks
from tests.support import planted, renderings

AZ = "azure-native:"
REGISTRY = AZ + "resources:Resource"
UNKNOWN = pulumi.UNKNOWN


# ---- the mocks follow previewOutputs.go -------------------------------------------------------


def test_an_any_typed_output_is_the_whole_input_and_the_rest_is_unknown():
    """The generic resource's `properties` is `pulumi.json#/Any`: the input as given, with no
    property Azure computes. `name` is an output only (the input is `resourceName`): unknown."""
    inputs = {
        "resourceName": "acr1",
        "resourceGroupName": "rg",
        "location": "westeurope",
        "properties": {"adminUserEnabled": False},
    }
    out = preview_outputs(REGISTRY, inputs)
    assert out["properties"] == {"adminUserEnabled": False}
    assert out["location"] == "westeurope"
    assert out["name"] is UNKNOWN and out["type"] is UNKNOWN and out["identity"] is UNKNOWN
    assert "resourceName" not in out and "resourceGroupName" not in out  # not outputs


def test_an_object_output_takes_its_inputs_and_leaves_computed_fields_unknown():
    """`#/types/...` objects are filled property by property (PreviewOutputs, recursively):
    a system identity's principal is unknown, its type is the input."""
    out = preview_outputs(
        AZ + "containerregistry:Task",
        {"identity": {"type": "SystemAssigned"}, "timeout": 10800.0, "step": {"type": "Docker"}},
    )
    assert out["identity"]["type"] == "SystemAssigned"
    assert out["identity"]["principalId"] is UNKNOWN
    assert out["timeout"] == 10800.0
    assert out["step"] == {"type": "Docker"}  # oneOf: the input as given
    # a property given a value of the wrong type is unknown, as is a nested unknown
    wrong = preview_outputs(AZ + "containerregistry:Task", {"timeout": "long"})
    assert wrong["timeout"] is UNKNOWN
    nested = preview_outputs(AZ + "containerregistry:Task", {"identity": UNKNOWN})
    assert nested["identity"] is UNKNOWN


def test_maps_and_lists_are_shaped_element_by_element():
    out = preview_outputs(
        AZ + "storage:StorageAccount",
        {"tags": {"a": "1", "b": UNKNOWN}, "kind": "StorageV2"},
    )
    assert out["tags"] == {"a": "1", "b": UNKNOWN}
    assert out["kind"] == "StorageV2" and out["primaryEndpoints"] is UNKNOWN


# ---- the whole program in both preview modes ---------------------------------------------------

SHIPPED = {path.stem.split(".", 1)[1]: path for path in STACK_FILES}
VARIANTS = ["dev", "prod", "prod-landing-zone", "prod-operators-jump-host"]


def _variant(name: str) -> tuple[str, dict, mocks.Rendering]:
    """(stack, config, its rendering as `pulumi up` deployed it)."""
    if name in SHIPPED:
        return name, read_stack_file(SHIPPED[name]), renderings.rendered(SHIPPED[name])
    if name == "prod-landing-zone":
        return "prod", renderings.landing_zone_config(), renderings.landing_zone()
    return "prod", renderings.prod_with_jump_host_config(), renderings.prod_with_jump_host()


def _retagged(config: dict) -> dict:
    """A change every taggable resource sees: each goes through the update's preview."""
    changed = copy.deepcopy(config)
    changed["azdl:tags"]["owner"] = "another-team"
    return changed


@functools.cache
def _previews(name: str) -> tuple[mocks.Rendering, mocks.Rendering]:
    stack, config, deployed = _variant(name)
    create = mocks.render(config, stack, mode=mocks.PREVIEW_CREATE)
    update = mocks.render(
        _retagged(config), stack, mode=mocks.PREVIEW_UPDATE, state=deployed.state()
    )
    return create, update


@pytest.mark.slow  # two renderings per variant: ~10 s each here
@pytest.mark.parametrize("name", VARIANTS)
def test_the_program_renders_in_both_preview_modes(name):
    create, update = _previews(name)
    _, _, deployed = _variant(name)
    declared = {(r.type, r.name) for r in deployed.resources}
    assert {(r.type, r.name) for r in create.resources} == declared
    assert {(r.type, r.name) for r in update.resources} == declared
    for r in create.resources:
        if r.custom:
            assert r.id is None, (r.type, r.name)  # nothing exists yet
    steps = {r.step for r in update.resources if r.custom}
    assert mocks.UPDATED in steps and steps <= {mocks.UPDATED, mocks.SAME}
    tagged = [r for r in update.resources if r.custom and "tags" in r.inputs]
    assert tagged and all(r.step == mocks.UPDATED for r in tagged)


# The plant in the interpreter `azdl plan` renders in: Python imports `sitecustomize` from the
# import path when it starts (docs.python.org/3/library/site.html), and the render inherits
# PYTHONPATH.
PLANTED = """
import infra.registry as registry
from tests.support.planted import login_server_read

registry.Registry.__init__ = login_server_read(registry.Registry.__init__)
"""


@pytest.mark.slow  # renders the dev stack in azdl plan's interpreter (seconds)
def test_a_read_of_a_computed_property_fails_azdl_plan(tmp_path, monkeypatch, capsys):
    """`azdl plan` is the preview of a create: Azure has not filled in `loginServer`, so the
    read fails there, as it fails a real first `pulumi preview`. The shipped program renders
    (the cli_plan_output fixture)."""
    (tmp_path / "sitecustomize.py").write_text(PLANTED)
    # The checkout named, for the plant's own imports: an empty PYTHONPATH left a "" entry (the
    # working folder) that did it, and any PYTHONPATH a user has set did not.
    path = [str(tmp_path), str(PACKAGES_ROOT), os.environ.get("PYTHONPATH")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, path)))
    assert main(["plan", "dev", "--out", str(tmp_path / "plan")]) == 2
    error = capsys.readouterr().err
    assert "rendering stack 'dev' failed (the program raised)" in error
    assert "KeyError: 'loginServer'" in error
    assert not (tmp_path / "plan" / "dev.json").exists()


@pytest.mark.slow  # two renderings of the dev stack (seconds)
def test_a_preview_that_changes_the_registry_meets_the_same_trap(monkeypatch):
    """The update's preview of the registry is its inputs plus name and location."""
    path = SHIPPED["dev"]
    config = copy.deepcopy(read_stack_file(path))
    config["azdl:registry"] = {"sku": "Premium"}
    state = renderings.rendered(path).state()
    preview = mocks.render(config, "dev", mode=mocks.PREVIEW_UPDATE, state=state)
    assert preview.get(REGISTRY, "registry").step == mocks.UPDATED
    monkeypatch.setattr(
        registry.Registry, "__init__", planted.login_server_read(registry.Registry.__init__)
    )
    with pytest.raises(KeyError, match="loginServer"):
        mocks.render(config, "dev", mode=mocks.PREVIEW_UPDATE, state=state)


@pytest.mark.slow  # reads the deployed prod stack (rendered once per session)
def test_the_login_server_is_known_in_a_preview_and_is_azures():
    """The same value Azure answers after the create (the update mode's computed value), known
    before it."""
    deployed = renderings.rendered(SHIPPED["prod"])
    answered = deployed.get(REGISTRY, "registry").state["properties"]["loginServer"]
    assert deployed.outputs["registryLoginServer"] == answered


def test_the_login_server_is_in_the_clouds_registry_domain(monkeypatch):
    """Where the provider deploys to another cloud, the login server is in that cloud's
    registry domain (infra/registry.py cites the domains)."""
    name = "azdlprodacr1"
    assert registry.login_server(name, registry.registry_domain()) == f"{name}.azurecr.io"
    monkeypatch.setenv("ARM_ENVIRONMENT", "usgovernment")
    assert registry.login_server(name, registry.registry_domain()) == f"{name}.azurecr.us"
    monkeypatch.setenv("ARM_ENVIRONMENT", "AzureChinaCloud")
    assert registry.registry_domain() == "azurecr.cn"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("ARM_ENVIRONMENT", "german", "azure-native:environment = 'german' is invalid"),
        ("ARM_METADATA_HOSTNAME", "management.local", "azure-native:metadataHost is set"),
    ],
)
def test_a_cloud_without_a_known_registry_domain_stops_before_anything(
    monkeypatch, variable, value, message
):
    monkeypatch.setenv(variable, value)
    instance = mocks.AzureMocks(mode=mocks.PREVIEW_CREATE)
    with pytest.raises(ConfigError, match=message):
        mocks.render(read_stack_file(SHIPPED["dev"]), "dev", mocks=instance)
    assert instance.resources == []
