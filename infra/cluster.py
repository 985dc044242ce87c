"""Cluster: the AmlCompute GPU cluster, its user-assigned identity and that identity's roles, and
in private stacks the image-build compute with an identity of its own that can only push to the
registry (docs/architecture.md, "Workspace and cluster")."""

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import machinelearningservices, managedidentity

from infra.catalogue import VmSize
from infra.config import StackConfig
from infra.role_assignments import assign_role


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
        self.role_assignments = [
            assign_role(
                self,
                purpose,
                role,
                self.identity.principal_id,
                "ServicePrincipal",
                scope,
                args.subscription_id,
                f"azdl {cfg.stack}: cluster identity, {role}",
            )
            for purpose, role, scope in (
                ("registry-pull", "AcrPull", args.registry_id),
                ("data-read", "Storage Blob Data Reader", args.data_container_id),
                ("outputs-write", "Storage Blob Data Contributor", args.outputs_account_id),
            )
        ]
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
            push = assign_role(
                self,
                "image-build-push",
                "AcrPush",
                self.image_build_identity.principal_id,
                "ServicePrincipal",
                args.registry_id,
                args.subscription_id,
                f"azdl {cfg.stack}: image-build identity, AcrPush",
            )
            self.image_build = self._compute(
                "image-build",
                args,
                self.image_build_identity,
                [push, *args.after],
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
