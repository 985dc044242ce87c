"""A subscription across deployments, for the tests that destroy and deploy again: what Azure
keeps between two deployments (soft-deleted names, retained resources, resource groups that
take their contents with them), and the test engine's mocks that create through it.

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
"""

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from tests.support import mock_engine as mocks

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
