"""Cluster: the AmlCompute GPU cluster, its managed identity and that identity's roles.

The identity is user-assigned so its roles exist before the first node boots: AcrPull on the
registry, Storage Blob Data Reader on the training-data container, Storage Blob Data
Contributor on the outputs account (the workspace's storage too, where job logs land). Role
assignments get GUID names derived from scope, principal and role (see role_assignment_name).
Nodes get no SSH and, unless the stack allows it, no public IP.

Private stacks also get the small CPU image-build compute that the workspace names (a workspace
whose registry is private builds environment images on it and pushes them with the compute's
identity: how-to-secure-workspace-vnet, how-to-identity-based-service-authentication). It has
its own identity holding only AcrPush on the stack's registry (push and pull), none of the
cluster's data roles. Computes without node public IPs are created after `after` (the
workspace's private endpoint, DNS zone group and VNet links: azdl/review/deploy_order.py).
"""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import authorization, machinelearningservices, managedidentity

from infra.catalogue import VmSize
from infra.config import StackConfig
from infra.deployer import ASSIGNABLE_ROLES

# The managed identities' roles (of those the deployer may assign: infra/deployer.py).
ROLES = {
    name: ASSIGNABLE_ROLES[name]
    for name in ("AcrPull", "AcrPush", "Storage Blob Data Reader", "Storage Blob Data Contributor")
}


def role_assignment_name(scope: str, principal_id: str, role_definition_id: str) -> str:
    """A GUID seeded by scope, principal and role definition, as Bicep's `guid(...)` is.

    Role-assignment names are unique tenant-wide and Azure refuses to reuse one for another
    scope or principal, so the name must depend on exactly what the assignment grants: the
    same grant always gets the same name (re-runs never duplicate it), a different one never
    collides. ARM ids are case-insensitive, so they are lowercased first.
    """
    seed = "|".join(part.lower() for part in (scope, principal_id, role_definition_id))
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"azdl-role-assignment:{seed}"))


@dataclass
class ClusterArgs:
    config: StackConfig
    resource_group_name: pulumi.Input[str]
    subscription_id: pulumi.Input[str]
    workspace_name: pulumi.Input[str]
    training_subnet_id: pulumi.Input[str]
    registry_id: pulumi.Input[str]
    data_container_id: pulumi.Input[str]
    outputs_account_id: pulumi.Input[str]
    after: Sequence[pulumi.Resource] = ()  # what the computes are created after


class Cluster(pulumi.ComponentResource):
    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("azdl:infra:Cluster", name, None, opts)
        cfg = self._cfg = args.config
        self._rg = args.resource_group_name

        self.identity = self._identity("identity", cfg.names.cluster_identity)
        self.role_assignments = self._grant(
            "cluster identity",
            self.identity,
            [
                ("registry-pull", "AcrPull", args.registry_id),
                ("data-read", "Storage Blob Data Reader", args.data_container_id),
                ("outputs-write", "Storage Blob Data Contributor", args.outputs_account_id),
            ],
            args.subscription_id,
        )
        self.compute = self._compute(
            "compute",
            args,
            self.identity,
            [*self.role_assignments, *args.after],
            cfg.names.cluster,
            cfg.cluster.vm_size,
            cfg.cluster.priority,
            cfg.cluster.min_nodes,
            cfg.cluster.max_nodes,
        )
        self.image_build = self.image_build_identity = None
        if cfg.network.private:
            self.image_build_identity = self._identity(
                "image-build-identity", cfg.names.image_build_identity
            )
            pushes = self._grant(
                "image-build identity",
                self.image_build_identity,
                [("image-build-push", "AcrPush", args.registry_id)],
                args.subscription_id,
            )
            self.image_build = self._compute(
                "image-build",
                args,
                self.image_build_identity,
                [*pushes, *args.after],
                cfg.names.image_build_compute,
                cfg.image_build_vm_size,
                "Dedicated",
                0,
                1,
            )
        self.register_outputs(
            {
                "clusterName": self.compute.name,
                "identityClientId": self.identity.client_id,
                "identityPrincipalId": self.identity.principal_id,
            }
        )

    def _identity(self, logical: str, name: str) -> managedidentity.UserAssignedIdentity:
        cfg = self._cfg
        # Keyword arguments: the Args class's `resource_name` collides with the logical name
        # in the SDK's constructor (the keyword form renames it `resource_name_`).
        return managedidentity.UserAssignedIdentity(
            logical,
            pulumi.ResourceOptions(parent=self),
            resource_group_name=self._rg,
            resource_name_=name,
            location=cfg.location,
            tags=cfg.tags,
        )

    def _grant(
        self,
        who: str,
        identity: managedidentity.UserAssignedIdentity,
        grants: list[tuple[str, str, pulumi.Input[str]]],
        subscription_id: pulumi.Input[str],
    ) -> list[authorization.RoleAssignment]:
        """Role assignments (logical name, built-in role, scope) for `identity`."""
        # Azure refuses a second assignment of the same role to the same principal at the same
        # scope, so a replaced assignment (e.g. renamed) must be deleted before its successor.
        replace_safely = pulumi.ResourceOptions(parent=self, delete_before_replace=True)
        assignments = []
        for purpose, role, scope in grants:
            definition = pulumi.Output.concat(
                "/subscriptions/",
                subscription_id,
                "/providers/Microsoft.Authorization/roleDefinitions/",
                ROLES[role],
            )
            principal = identity.principal_id
            name = pulumi.Output.all(scope, principal, definition).apply(
                lambda a: role_assignment_name(*a)
            )
            assignments.append(
                authorization.RoleAssignment(
                    purpose,
                    authorization.RoleAssignmentArgs(
                        role_assignment_name=name,
                        principal_id=principal,
                        principal_type="ServicePrincipal",
                        role_definition_id=definition,
                        scope=scope,
                        description=f"azdl {self._cfg.stack}: {who}, {role}",
                    ),
                    replace_safely,
                )
            )
        return assignments

    def _compute(
        self,
        logical: str,
        args: ClusterArgs,
        identity: managedidentity.UserAssignedIdentity,
        after: list[pulumi.Resource],
        name: str,
        vm_size: VmSize,
        priority: str,
        min_nodes: int,
        max_nodes: int,
    ) -> machinelearningservices.Compute:
        cfg = args.config
        return machinelearningservices.Compute(
            logical,
            machinelearningservices.ComputeArgs(
                resource_group_name=args.resource_group_name,
                workspace_name=args.workspace_name,
                compute_name=name,
                location=cfg.location,
                identity=machinelearningservices.ManagedServiceIdentityArgs(
                    type="UserAssigned", user_assigned_identities=[identity.id]
                ),
                properties=machinelearningservices.AmlComputeArgs(
                    compute_type="AmlCompute",
                    disable_local_auth=True,
                    properties=machinelearningservices.AmlComputePropertiesArgs(
                        vm_size=vm_size.name,
                        vm_priority=priority,
                        os_type="Linux",
                        scale_settings=machinelearningservices.ScaleSettingsArgs(
                            min_node_count=min_nodes,
                            max_node_count=max_nodes,
                            node_idle_time_before_scale_down=(
                                f"PT{cfg.cluster.idle_seconds_before_scale_down}S"
                            ),
                        ),
                        subnet=machinelearningservices.ResourceIdArgs(id=args.training_subnet_id),
                        # The SDK defaults are a public IP per node and "NotSpecified" SSH.
                        enable_node_public_ip=cfg.cluster.node_public_ip,
                        remote_login_port_public_access="Disabled",
                    ),
                ),
                tags=cfg.tags,
            ),
            pulumi.ResourceOptions(parent=self, depends_on=after),
        )
