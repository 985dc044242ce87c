"""Bring your own resource groups (`azdl:resourceGroups`): the stack deploys into two existing
groups and creates none, so the deploying identity needs Contributor and the conditioned Role
Based Access Control Administrator on those two groups only, not on the subscription.

What makes that enough, per Azure RBAC's scope rule (a role assigned at a resource group
applies to every resource in it: "Understand scope for Azure RBAC",
https://learn.microsoft.com/azure/role-based-access-control/scope-overview): every resource the
stack declares, and every role assignment's scope, lies inside one of the two groups."""

import copy
import re

import pytest

from infra.config import ConfigError, load_config, read_stack_file
from infra.naming import stable_suffix
from tests.shipped import STACK_FILES
from tests.support import mock_engine as mocks

GROUPS = {"platform": "team-ml-rg", "data": "team-ml-data-rg"}
SHIPPED = {p.stem.split(".", 1)[1]: p for p in STACK_FILES}


def config(stack: str, groups=GROUPS) -> dict:
    values = copy.deepcopy(read_stack_file(SHIPPED[stack]))
    values["azdl:resourceGroups"] = groups
    return values


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ({"platform": "team-ml-rg"}, "azdl:resourceGroups.data is required"),
        ({"platform": "a", "data": "A"}, "another group than platform"),
        ({"platform": "team-ml-rg", "data": "ends-with-a-period."}, "azdl:resourceGroups.data"),
        ({"platform": "x" * 91, "data": "d"}, "azdl:resourceGroups.platform"),
        ({"platform": "p", "data": "d", "shared": "s"}, "unknown key; known: platform, data"),
    ],
)
def test_bad_group_settings_name_the_key(groups, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(config("dev", groups), stack="dev")


def test_the_names_derive_from_the_existing_groups():
    cfg = load_config(config("dev"), stack="dev", subscription_id=mocks.SUBSCRIPTION_ID)
    assert cfg.names.resource_group == "team-ml-rg"
    assert cfg.names.data_resource_group == "team-ml-data-rg"
    suffix = stable_suffix("azdl", "dev", mocks.SUBSCRIPTION_ID, "team-ml-rg")
    assert cfg.names.registry.endswith(suffix)


def _inside(resource_id: str) -> str | None:
    """The resource group an ARM id lies in (None for one outside any group)."""
    match = re.match(r"/subscriptions/[^/]+/resourceGroups/([^/]+)(/|$)", resource_id, re.I)
    return match.group(1) if match else None


@pytest.mark.slow  # two renderings: ~20 s each here
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_stack_creates_no_group_and_stays_inside_the_two(stack):
    rendering = mocks.render(config(stack), stack)
    assert rendering.of_type("azure-native:resources:ResourceGroup") == []
    assert rendering.outputs["resourceGroupName"] == "team-ml-rg"
    assert rendering.outputs["dataResourceGroupName"] == "team-ml-data-rg"
    groups = {g.lower() for g in GROUPS.values()}
    for r in rendering.resources:
        if r.custom and r.type.startswith("azure-native:"):
            assert (_inside(r.id) or "").lower() in groups, (r.type, r.name, r.id)
        if r.type == "azure-native:authorization:RoleAssignment":
            assert (_inside(r.inputs["scope"]) or "").lower() in groups, r.name
    data = {r.name: r for r in rendering.of_type("azure-native:storage:StorageAccount")}
    assert data["data"].inputs["resourceGroupName"] == "team-ml-data-rg"
    assert data["outputs"].inputs["resourceGroupName"] == "team-ml-data-rg"
    # and the first preview renders too
    mocks.render(config(stack), stack, mode=mocks.PREVIEW_CREATE)
