"""`pulumi destroy` then `pulumi up` in the same subscription, under mocks that model what Azure
keeps between the two: soft-deleted names, resources Pulumi retained or kept, and resource
groups that take their contents with them.

The model (`Subscription`), each rule with its source:
- A deleted Azure ML workspace stays soft-deleted for 14 days and its name cannot be reused
  meanwhile ("Workspace soft deletion", https://learn.microsoft.com/azure/machine-learning/
  concept-soft-delete, ms.date 2025-10-31: "You can't reuse the name of a workspace that has
  been soft deleted until the retention period has passed").
- A deleted Key Vault keeps its name for its retention period, 7-90 days, and purge protection
  refuses an early purge ("Azure Key Vault soft-delete overview",
  https://learn.microsoft.com/azure/key-vault/general/soft-delete-overview).
- Deleting a resource group deletes every resource in it, whatever Pulumi's retainOnDelete or
  protect says about them (pulumi/pulumi-azure-native#2522; "Azure Resource Manager resource
  group and resource deletion", https://learn.microsoft.com/azure/azure-resource-manager/
  management/delete-resource-group).
- azure-native refuses to create a resource that already exists (it checks with a GET first:
  pulumi/pulumi-azure-native#303, #3688): a resource that outlived the stack must be in the
  state (kept by `--exclude-protected`, or `pulumi import`-ed) before `up` declares it again.
- `pulumi destroy --exclude-protected` keeps protected resources and what they depend on in the
  state; a retainOnDelete resource leaves the state but stays in Azure.
Each `up` runs the whole program as an update against the same Subscription; the Pulumi state
between runs holds only what the destroy kept.
"""

import itertools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from infra import mocks
from infra.config import read_stack_file

ROOT = Path(__file__).resolve().parents[2]
STACK_FILES = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
SOFT_DELETED_TYPES = {
    "azure-native:machinelearningservices:Workspace": "workspace",
    "azure-native:keyvault:Vault": "key vault",
}
GROUP = "azure-native:resources:ResourceGroup"


class Collision(Exception):
    """What Azure or azure-native answers a create that meets a name still taken."""


@dataclass
class Subscription:
    live: dict[str, mocks.RecordedResource] = field(default_factory=dict)  # ARM id -> resource
    soft_deleted: dict[str, str] = field(default_factory=dict)  # key -> what
    # The stack's state: (type, logical name) -> the resource as last deployed.
    state: dict[tuple[str, str], mocks.RecordedResource] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)  # ARM ids created by the last `up`
    # ACR's source upload paths: never the same twice (mocks.AzureMocks, upload_numbers)
    upload_numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    @staticmethod
    def soft_key(record: mocks.RecordedResource) -> str:
        if record.type == "azure-native:keyvault:Vault":  # vault names are global
            return f"vault/{record.inputs['vaultName'].lower()}"
        return record.id.lower()  # a workspace name is reserved in its group

    def create(self, record: mocks.RecordedResource, import_id: str) -> None:
        key, rid = (record.type, record.name), record.id.lower()
        if key in self.state:
            self.state[key] = record  # an update of a resource the stack still holds
            return
        if import_id:
            if import_id.lower() not in self.live:
                raise Collision(f"cannot import {import_id}: it does not exist")
        elif rid in self.live:
            raise Collision(f"cannot create already existing resource '{record.id}'")
        elif record.type in SOFT_DELETED_TYPES and self.soft_key(record) in self.soft_deleted:
            raise Collision(
                f"{SOFT_DELETED_TYPES[record.type]} '{record.id}': a soft-deleted "
                f"{SOFT_DELETED_TYPES[record.type]} of that name exists"
            )
        self.live[rid] = record
        self.created.append(rid)
        self.state[key] = record

    def delete(self, rid: str) -> None:
        record = self.live.pop(rid, None)
        if record is None:
            return
        if record.type in SOFT_DELETED_TYPES:
            self.soft_deleted[self.soft_key(record)] = SOFT_DELETED_TYPES[record.type]
        if record.type == GROUP:  # a group takes everything in it along
            for other in [i for i in self.live if i.startswith(rid + "/")]:
                self.delete(other)

    def destroy(self, rendering: mocks.Rendering) -> None:
        """`pulumi destroy --exclude-protected`: protected resources and everything they depend
        on (their recorded dependencies, transitively) stay; the rest leaves the state, and
        Azure deletes it unless it is retained."""
        by_urn = {r.urn: r for r in rendering.resources}
        kept = {r.urn for r in rendering.resources if r.protect}
        pending = list(kept)
        while pending:
            for dep in by_urn[pending.pop()].dependencies:
                if dep not in kept and dep in by_urn:
                    kept.add(dep)
                    pending.append(dep)
        for record in rendering.resources:
            if record.urn in kept:
                continue
            self.state.pop((record.type, record.name), None)
            if record.retain_on_delete or not record.id:
                continue  # Pulumi forgets it; Azure keeps it (unless its group goes)
            self.delete(record.id.lower())

    def pulumi_import(self, rendering: mocks.Rendering, names: list[str]) -> None:
        """`pulumi import` of resources that outlived the stack (docs/teardown.md)."""
        for record in rendering.resources:
            if record.name in names and record.id and record.id.lower() in self.live:
                self.state[(record.type, record.name)] = record


class SubscriptionMocks(mocks.AzureMocks):
    """AzureMocks whose creates go through `Subscription`, against the stack's state. A
    RandomId draws fresh bytes when it is created, and keeps its value while it stays in the
    state (the random provider's behaviour,
    https://www.pulumi.com/registry/packages/random/api-docs/randomid/). `options`: more
    AzureMocks settings (`replace`, `run_status`)."""

    def __init__(self, subscription: Subscription, **options):
        super().__init__(
            state=subscription.state,
            random_bytes=self.draw,
            upload_numbers=subscription.upload_numbers,
            **options,
        )
        self.subscription = subscription

    def draw(self, name: str, n: int) -> bytes:
        held = self.subscription.state.get((mocks.RANDOM_ID, name))
        return bytes.fromhex(held.state["hex"]) if held else os.urandom(n)

    def new_resource(self, args):
        answer = super().new_resource(args)
        record = self._local.last
        if record is None or not record.custom or not record.id:
            return answer
        if record.type.startswith("azure-native:"):
            self.subscription.create(record, args.resource_id or "")
        else:  # a RandomId or a dynamic resource: in the state, nothing in Azure
            self.subscription.state[(record.type, record.name)] = record
        return answer


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
    from tests.infra.test_infra_access import JUMP_HOST, OPERATORS

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
