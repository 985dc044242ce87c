"""`pulumi destroy` then `pulumi up` in the same subscription, under mocks that model what Azure
keeps between the two: soft-deleted names, resources Pulumi retained or kept, and resource
groups that take their contents with them.

The model, each rule with its source, is `Subscription` (tests/support/subscription.py).
Each `up` runs the whole program as an update against the same Subscription; the Pulumi state
between runs holds only what the destroy kept.
"""

import re

import pytest

from infra.config import read_stack_file
from tests.shipped import STACK_FILES
from tests.support import mock_engine as mocks
from tests.support.renderings import JUMP_HOST, OPERATORS
from tests.support.subscription import Subscription, SubscriptionMocks

pytestmark = pytest.mark.slow  # every test renders the program, most several times (seconds)

# Images are not what this is about: named prebuilt, nothing is uploaded (tests/images covers
# the upload an update makes).
PREBUILT = {
    "azdl:images": {
        "prebuilt": {
            "tensorflow": "team.azurecr.io/azdl/tensorflow:1",
            "pytorch": "team.azurecr.io/azdl/pytorch:1",
        }
    }
}


def up(subscription: Subscription, stack_file, **changes) -> mocks.Rendering:
    config = {**read_stack_file(stack_file), **PREBUILT, **changes}
    subscription.created = []
    stack = stack_file.stem.split(".", 1)[1]
    return mocks.render(config, stack, mocks=SubscriptionMocks(subscription))


def names_of(rendering, token, key):
    return sorted(r.inputs[key] for r in rendering.of_type(token))


@pytest.mark.parametrize("stack_file", STACK_FILES, ids=lambda p: p.name)
def test_destroy_then_up_next_day_gets_new_soft_deleted_names_and_keeps_the_data(stack_file):
    subscription = Subscription()
    first = up(subscription, stack_file)
    data_ids = {
        r.id.lower() for r in first.of_type("azure-native:storage:StorageAccount") if r.protect
    }
    assert data_ids  # both shipped stacks protect their data
    subscription.destroy(first)
    assert set(subscription.soft_deleted.values()) == {"workspace", "key vault"}
    # the shipped stacks protect their data: it is still in Azure and in the state
    assert data_ids <= set(subscription.live)

    second = up(subscription, stack_file)  # would raise Collision on any name still taken

    for token, key in (("machinelearningservices:Workspace", "workspaceName"),
                       ("keyvault:Vault", "vaultName")):  # fmt: skip
        before, after = (
            names_of(first, "azure-native:" + token, key),
            names_of(second, "azure-native:" + token, key),
        )
        assert before != after, token
        assert all(re.fullmatch(r"[a-z0-9]+-(mlw|kv)-[0-9a-f]{6}", n) for n in before + after)
    # the protected accounts keep their names and were never re-created
    assert data_ids <= {r.id.lower() for r in second.of_type("azure-native:storage:StorageAccount")}
    assert not data_ids & set(subscription.created)


def test_the_model_sees_the_collision_that_fixed_names_would_cause(monkeypatch):
    """The same redeploy with the workspace and vault names of the first deployment fails in
    the model as it does in Azure: the check above can fail."""
    monkeypatch.setattr("infra.program.with_deployment", lambda names, _d: names)
    subscription = Subscription()
    stack_file = STACK_FILES[0]
    subscription.destroy(up(subscription, stack_file))
    with pytest.raises(Exception, match="soft-deleted"):
        up(subscription, stack_file)


RETAIN = {"azdl:storage": {"dataProtection": "retain", "outputsProtection": "retain"}}
KEPT = ["data-resource-group", "data", "data-container", "outputs", "outputs-container",
        "outputs-blob-service", "outputs-lifecycle",
        "nfs", "nfs-share"]  # fmt: skip


@pytest.mark.parametrize("stack_file", STACK_FILES, ids=lambda p: p.name)
def test_retained_checkpoints_and_logs_survive_destroy(stack_file):
    subscription = Subscription()
    storage = {**read_stack_file(stack_file).get("azdl:storage", {}), **RETAIN["azdl:storage"]}
    first = up(subscription, stack_file, **{"azdl:storage": storage})
    outputs = first.get("azure-native:storage:StorageAccount", "outputs")
    container = first.get("azure-native:storage:BlobContainer", "outputs-container")
    subscription.destroy(first)
    # the platform group went, and took everything in it; the outputs were not in it
    assert outputs.id.lower() in subscription.live and container.id.lower() in subscription.live
    assert not any(r.type == "azure-native:machinelearningservices:Workspace"
                   for r in subscription.live.values())  # fmt: skip
    # after `pulumi import` of what was retained, the next `up` takes them over
    subscription.pulumi_import(first, KEPT)
    second = up(subscription, stack_file, **{"azdl:storage": storage})
    assert second.get("azure-native:storage:StorageAccount", "outputs").id == outputs.id
    assert outputs.id.lower() not in subscription.created


def test_retained_outputs_in_the_platform_group_would_be_lost(monkeypatch):
    """Planted: the outputs account back in the platform group. Its group's deletion takes
    it, retainOnDelete or not: the test above can fail."""
    from infra import storage

    real = storage.Storage.__init__

    def platform_group(self, name, args, opts=None):
        main = args.data_resource_group_name.apply(lambda g: g.removesuffix("-data-rg") + "-rg")
        original = storage.storage.StorageAccount

        def account(logical, account_args, *rest, **kw):
            if logical == "outputs":
                account_args.resource_group_name = main
            return original(logical, account_args, *rest, **kw)

        monkeypatch.setattr(storage.storage, "StorageAccount", account)
        real(self, name, args, opts)
        monkeypatch.setattr(storage.storage, "StorageAccount", original)

    monkeypatch.setattr(storage.Storage, "__init__", platform_group)
    subscription = Subscription()
    stack_file = STACK_FILES[0]
    storage_cfg = {**read_stack_file(stack_file).get("azdl:storage", {}), **RETAIN["azdl:storage"]}
    first = up(subscription, stack_file, **{"azdl:storage": storage_cfg})
    outputs = first.get("azure-native:storage:StorageAccount", "outputs")
    assert outputs.retain_on_delete
    subscription.destroy(first)
    assert outputs.id.lower() not in subscription.live


def test_an_update_keeps_every_role_assignment_in_place():
    """A second `up` of a deployed stack (with operators and a jump host, so every kind of role
    assignment is there) declares each assignment under the same logical name with the same
    inputs: Pulumi updates nothing and replaces nothing (a new roleAssignmentName, scope,
    principal or role would replace it), and creates no new one."""
    prod = next(f for f in STACK_FILES if f.name == "Pulumi.prod.yaml")
    changes = {"azdl:operators": OPERATORS, "azdl:access": JUMP_HOST}
    subscription = Subscription()
    first = up(subscription, prod, **changes)
    second = up(subscription, prod, **changes)
    token = "azure-native:authorization:RoleAssignment"

    def assignments(rendering):
        return {(r.parent, r.name): r.inputs for r in rendering.of_type(token)}

    assert len(assignments(first)) == 3 + 1 + 2 * (3 + 4)  # cluster, image build, operators
    assert assignments(second) == assignments(first)
    assert not [rid for rid in subscription.created if "/roleAssignments/" in rid]
