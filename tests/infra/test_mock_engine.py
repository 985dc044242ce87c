"""The test engine's own tests (tests/support/mock_engine): its preview of a create is `azdl
plan`'s (`infra.mocks.PreviewMocks`), its preview of an update and its `pulumi up` follow the
provider's and the engine's source, and it answers only what Azure would."""

import pulumi
import pytest
from pulumi_azure_native import resources, storage

from infra.mocks import PreviewMocks
from tests.support import mock_engine as mocks

REGISTRY = "azure-native:resources:Resource"


def _run(declare, mode=mocks.UPDATE, state=None):
    """`declare` run under the engine in `mode`; (the engine, what the last resource's id and
    name resolved to)."""
    engine = mocks.AzureMocks(mode=mode, state=state)
    pulumi.runtime.set_mocks(engine, "azdl", "unit", preview=engine.preview)
    seen = {}

    @pulumi.runtime.test
    def run():
        resource = declare()
        if resource is None:
            return None
        return pulumi.Output.all(resource.id, resource.name).apply(
            lambda v: seen.update(id=v[0], name=v[1])
        )

    run()
    return engine, seen


def _group(**tags):
    return resources.ResourceGroup(
        "rg", resource_group_name="rg1", location="westeurope", tags=tags or None
    )


def test_the_preview_of_a_create_is_azdl_plans_own():
    """The engine adds steps and state around PreviewMocks; it answers a create's preview with
    it, not with a copy of its own."""
    assert issubclass(mocks.AzureMocks, PreviewMocks)
    args = pulumi.runtime.MockResourceArgs(
        typ=REGISTRY,
        name="registry",
        inputs={"resourceName": "acr1", "location": "westeurope", "properties": {"a": 1}},
        provider="",
        resource_id="",
        custom=True,
    )
    engine = mocks.AzureMocks(mode=mocks.PREVIEW_CREATE)
    assert engine.new_resource(args) == PreviewMocks().new_resource(args)
    assert engine.resources[-1].step == mocks.CREATE


def test_a_create_preview_has_no_id_and_an_update_preview_keeps_id_name_and_location():
    """pulumi-azure-native provider/pkg/provider/provider.go (commit 006a62af): `Create` returns
    no id in a preview; `Update` keeps the id and its "stableOutputs", name and location."""
    created, seen = _run(_group, mocks.PREVIEW_CREATE)
    assert created.resources[-1].id is None and seen == {}  # id and `name` unknown: no apply
    deployed, _ = _run(_group)
    record = deployed.resources[-1]
    assert record.state["name"] == "rg1" and record.id.endswith("/resourceGroups/rg1")
    state = {(record.type, "rg"): record}

    updated, seen = _run(lambda: _group(new="tag"), mocks.PREVIEW_UPDATE, state)
    changed = updated.resources[-1]
    assert changed.step == mocks.UPDATED
    assert seen == {"id": record.id, "name": "rg1"}
    assert changed.state["location"] == "westeurope" and changed.state["tags"] == {"new": "tag"}
    same, _ = _run(_group, mocks.PREVIEW_UPDATE, state)
    assert same.resources[-1].step == mocks.SAME
    assert same.resources[-1].state == record.state  # no provider call


def test_missing_required_properties_are_not_filled_in():
    def declare_without_kind():
        storage.StorageAccount(
            "incomplete", resource_group_name="rg", sku=storage.SkuArgs(name="Standard_LRS")
        )

    with pytest.raises(TypeError, match="kind"):
        _run(declare_without_kind)


def test_client_config_is_answered_and_other_calls_are_refused():
    from pulumi_azure_native import authorization

    seen = {}

    def call_client_config():
        authorization.get_client_config_output().subscription_id.apply(
            lambda s: seen.update(subscription=s)
        )

    _run(call_client_config)
    assert seen["subscription"] == mocks.SUBSCRIPTION_ID

    def call_something_unmocked():
        storage.list_storage_account_keys_output(account_name="a", resource_group_name="b")

    with pytest.raises(Exception, match="no Azure answer is mocked"):
        _run(call_something_unmocked)


def test_an_update_answers_arm_ids_and_computed_properties():
    def declare():
        account = storage.StorageAccount(
            "acct",
            storage.StorageAccountArgs(
                resource_group_name="rg1",
                account_name="acct1",
                kind="StorageV2",
                sku=storage.SkuArgs(name="Standard_LRS"),
            ),
        )
        storage.BlobContainer(
            "c", storage.BlobContainerArgs(resource_group_name="rg1", account_name=account.name)
        )

    engine, _ = _run(declare)
    by_name = {r.name: r for r in engine.resources}
    assert by_name["acct"].id.endswith(
        "/resourceGroups/rg1/providers/Microsoft.Storage/storageAccounts/acct1"
    )
    blob = by_name["acct"].state["primaryEndpoints"]["blob"]
    assert blob == "https://acct1.blob.core.windows.net/"
    assert by_name["c"].inputs["accountName"] == "acct1"
    assert by_name["c"].id.endswith("/storageAccounts/acct1/blobServices/default/containers/c")
