"""`pulumi preview` as pulumi-azure-native answers it, before the first `up` and before an update.

The mocks' preview modes follow the provider's own source (infra/mocks.py cites it):
`provider/pkg/convert/previewOutputs.go` (pulumi/pulumi-azure-native, commit
604cfd525f965477da629fdb2474063bdce7d798) and `Create` / `Update` in
`provider/pkg/provider/provider.go` (commit 006a62afe453b416e5d5c98d2d91c4c7281f52f9). The first
tests hold the mocks to those rules; the rest render the whole program in both preview modes for
every shipped stack and the landing-zone and operators variants, and plant the read that a real
first preview meets.
"""

import copy
import functools

import pulumi
import pytest

from infra import mocks, registry
from infra.config import ConfigError, read_stack_file
from tests.infra.conftest import STACK_FILES, rendered
from tests.infra.test_infra_access import (
    _landing_zone,
    _prod_with_jump_host,
    landing_zone_config,
    prod_with_jump_host_config,
)

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
    out = mocks.preview_outputs(REGISTRY, inputs)
    assert out["properties"] == {"adminUserEnabled": False}
    assert out["location"] == "westeurope"
    assert out["name"] is UNKNOWN and out["type"] is UNKNOWN and out["identity"] is UNKNOWN
    assert "resourceName" not in out and "resourceGroupName" not in out  # not outputs


def test_an_object_output_takes_its_inputs_and_leaves_computed_fields_unknown():
    """`#/types/...` objects are filled property by property (PreviewOutputs, recursively):
    a system identity's principal is unknown, its type is the input."""
    out = mocks.preview_outputs(
        AZ + "containerregistry:Task",
        {"identity": {"type": "SystemAssigned"}, "timeout": 10800.0, "step": {"type": "Docker"}},
    )
    assert out["identity"]["type"] == "SystemAssigned"
    assert out["identity"]["principalId"] is UNKNOWN
    assert out["timeout"] == 10800.0
    assert out["step"] == {"type": "Docker"}  # oneOf: the input as given
    # a property given a value of the wrong type is unknown, as is a nested unknown
    wrong = mocks.preview_outputs(AZ + "containerregistry:Task", {"timeout": "long"})
    assert wrong["timeout"] is UNKNOWN
    nested = mocks.preview_outputs(AZ + "containerregistry:Task", {"identity": UNKNOWN})
    assert nested["identity"] is UNKNOWN


def test_maps_and_lists_are_shaped_element_by_element():
    out = mocks.preview_outputs(
        AZ + "storage:StorageAccount",
        {"tags": {"a": "1", "b": UNKNOWN}, "kind": "StorageV2"},
    )
    assert out["tags"] == {"a": "1", "b": UNKNOWN}
    assert out["kind"] == "StorageV2" and out["primaryEndpoints"] is UNKNOWN


def _run(mode, declare, state=None):
    state = state or {}
    instance = mocks.AzureMocks(mode=mode, state=state)
    pulumi.runtime.set_mocks(instance, "azdl", "unit", preview=instance.preview)
    seen = {}

    @pulumi.runtime.test
    def run():
        resource = declare()
        return pulumi.Output.all(resource.id, resource.name).apply(
            lambda v: seen.update(id=v[0], name=v[1])
        )

    run()
    return instance.resources[-1], seen


def _group():
    from pulumi_azure_native import resources

    return resources.ResourceGroup("rg", resource_group_name="rg1", location="westeurope")


def test_a_create_preview_has_no_id_and_an_update_preview_keeps_id_name_and_location():
    created, seen = _run(mocks.PREVIEW_CREATE, _group)
    assert created.id is None and seen == {}  # the id and `name` are unknown: no apply ran
    deployed, _ = _run(mocks.UPDATE, _group)
    assert deployed.state["name"] == "rg1" and deployed.id.endswith("/resourceGroups/rg1")

    def changed():
        from pulumi_azure_native import resources

        return resources.ResourceGroup(
            "rg", resource_group_name="rg1", location="westeurope", tags={"new": "tag"}
        )

    updated, seen = _run(mocks.PREVIEW_UPDATE, changed, {(deployed.type, "rg"): deployed})
    assert updated.step == mocks.UPDATED
    assert seen == {"id": deployed.id, "name": "rg1"}
    assert updated.state["location"] == "westeurope" and updated.state["tags"] == {"new": "tag"}
    same, _ = _run(mocks.PREVIEW_UPDATE, _group, {(deployed.type, "rg"): deployed})
    assert same.step == mocks.SAME and same.state == deployed.state  # no provider call


def test_the_update_mode_keeps_the_values_azure_computes():
    out = rendered(STACK_FILES[0]).get(REGISTRY, "registry")
    assert out.state["properties"]["loginServer"] == f"{out.inputs['resourceName']}.azurecr.io"


# ---- the whole program in both preview modes ---------------------------------------------------

SHIPPED = {path.stem.split(".", 1)[1]: path for path in STACK_FILES}
VARIANTS = ["dev", "prod", "prod-landing-zone", "prod-operators-jump-host"]


def _variant(name: str) -> tuple[str, dict, mocks.Rendering]:
    """(stack, config, its rendering as `pulumi up` deployed it)."""
    if name in SHIPPED:
        return name, read_stack_file(SHIPPED[name]), rendered(SHIPPED[name])
    if name == "prod-landing-zone":
        return "prod", landing_zone_config(), _landing_zone()
    return "prod", prod_with_jump_host_config(), _prod_with_jump_host()


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


def _old_login_server_read(monkeypatch):
    """Planted: the login server read from the generic registry's computed properties (what
    infra/registry.py did before), as an output of the registry component."""
    real = registry.Registry.__init__

    def reads_computed(self, name, args, opts=None):
        real(self, name, args, opts)
        read = self.registry.properties.apply(lambda p: p["loginServer"])
        self.register_outputs({"loginServer": read})

    monkeypatch.setattr(registry.Registry, "__init__", reads_computed)


def test_a_read_of_a_computed_property_fails_the_create_preview(monkeypatch):
    config = read_stack_file(SHIPPED["dev"])
    mocks.render(config, "dev", mode=mocks.PREVIEW_CREATE)  # the shipped program renders
    _old_login_server_read(monkeypatch)
    with pytest.raises(KeyError, match="loginServer"):
        mocks.render(config, "dev", mode=mocks.PREVIEW_CREATE)
    mocks.render(config, "dev")  # `pulumi up` alone never saw it: Azure fills it in


def test_a_preview_that_changes_the_registry_meets_the_same_trap(monkeypatch):
    """The update's preview of the registry is its inputs plus name and location."""
    path = SHIPPED["dev"]
    config = copy.deepcopy(read_stack_file(path))
    config["azdl:registry"] = {"sku": "Premium"}
    state = rendered(path).state()
    preview = mocks.render(config, "dev", mode=mocks.PREVIEW_UPDATE, state=state)
    assert preview.get(REGISTRY, "registry").step == mocks.UPDATED
    _old_login_server_read(monkeypatch)
    with pytest.raises(KeyError, match="loginServer"):
        mocks.render(config, "dev", mode=mocks.PREVIEW_UPDATE, state=state)


def test_the_login_server_is_known_in_a_preview_and_is_azures(monkeypatch):
    """The same value Azure answers after the create (the update mode's computed value), known
    before it; and the cloud's registry domain where the provider deploys elsewhere."""
    deployed = rendered(SHIPPED["prod"])
    answered = deployed.get(REGISTRY, "registry").state["properties"]["loginServer"]
    assert deployed.outputs["registryLoginServer"] == answered
    name = deployed.get(REGISTRY, "registry").inputs["resourceName"]
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
