"""The Pulumi program: validate the stack's config, then declare one component per concern.

`declare(config)` builds everything and returns the stack outputs; `platform()` declares it
from the stack's settings and exports them; `main()` is what `pulumi up` runs (through
`infra/__main__.py`) and what `azdl plan` runs offline (under `infra.mocks`). A team's own
program (`azdl init`) calls `platform()` and adds its own resources.
"""

import json
from types import SimpleNamespace
from typing import Any

import pulumi
import pulumi.runtime.config as pulumi_runtime_config
import pulumi_random as random
from pulumi_azure_native import authorization, resources

from infra import diagnostics
from infra.access import JumpHost, JumpHostArgs, OperatorAccess, OperatorAccessArgs
from infra.cluster import Cluster, ClusterArgs
from infra.config import (
    PROVIDER_LOCATION_KEY,
    STRING_KEYS,
    StackConfig,
    load_config,
    with_subscription,
)
from infra.exports import FIELDS, exported
from infra.images import TrainingImages, TrainingImagesArgs
from infra.naming import DEPLOYMENT_ID_BYTES, with_deployment
from infra.network import Network, NetworkArgs
from infra.private_link import Endpoint, PrivateLink, PrivateLinkArgs
from infra.registry import Registry, RegistryArgs, registry_domain
from infra.storage import Storage, StorageArgs, data_protection, strongest
from infra.workspace import BlobContainer, Workspace, WorkspaceArgs


def read_config() -> StackConfig:
    """The stack's `azdl:*` settings as Pulumi hands them over (structured values as JSON).

    Every key of the project's namespace is passed on, so a misspelt key fails validation
    instead of being ignored. The language host hands config to the program in PULUMI_CONFIG;
    the SDK's mocks set it in-process.
    """
    project = pulumi.get_project()
    present = {*pulumi_runtime_config.CONFIG.get(), *pulumi_runtime_config.get_config_env()}
    values: dict[str, Any] = {}
    for full_key in sorted(k for k in present if k.startswith(f"{project}:")):
        key, raw = full_key.split(":", 1)[1], pulumi_runtime_config.get_config(full_key)
        try:
            values[key] = raw if key in STRING_KEYS else json.loads(raw)
        except ValueError:
            values[key] = raw  # a plain string where structure is expected: validation says so
    if PROVIDER_LOCATION_KEY in present:  # checked against azdl:location (a common mix-up)
        values[PROVIDER_LOCATION_KEY] = pulumi_runtime_config.get_config(PROVIDER_LOCATION_KEY)
    cfg = load_config(values, stack=pulumi.get_stack(), project=project)
    # Global names derive from the subscription (infra/naming.py), asked only once the config
    # is valid; the deploying identity's own subscription is the one the stack deploys to.
    return with_subscription(cfg, authorization.get_client_config().subscription_id)


def resource_groups(cfg: StackConfig) -> tuple[pulumi.Input[str], pulumi.Input[str]]:
    """The (platform, data) resource groups' names: the two the stack creates, or the existing
    ones `azdl:resourceGroups` names (then the stack neither creates nor deletes a group)."""
    if cfg.resource_groups is not None:
        return cfg.names.resource_group, cfg.names.data_resource_group
    group = resources.ResourceGroup(
        "resource-group",
        resources.ResourceGroupArgs(
            resource_group_name=cfg.names.resource_group, location=cfg.location, tags=cfg.tags
        ),
    )
    # Data and outputs outlive compute: their own group, kept by `pulumi destroy` as strongly
    # as the most protected of them. Deleting a group deletes everything in it, whatever Pulumi
    # says about a child (pulumi/pulumi-azure-native#2522), so nothing kept lives in `group`.
    data_group = resources.ResourceGroup(
        "data-resource-group",
        resources.ResourceGroupArgs(
            resource_group_name=cfg.names.data_resource_group, location=cfg.location, tags=cfg.tags
        ),
        data_protection(strongest(cfg.storage.data_protection, cfg.storage.outputs_protection)),
    )
    return group.name, data_group.name


def declare(cfg: StackConfig) -> dict[str, Any]:
    """Declare the stack's resources; return its outputs by key (infra/exports.py)."""
    domain = registry_domain()  # checked before anything is declared
    client = authorization.get_client_config_output()
    group_name, data_group_name = resource_groups(cfg)
    net = Network("network", NetworkArgs(cfg, group_name))
    # Azure soft-deletes the workspace (14 days) and the Key Vault (up to 90): their names end
    # in an id drawn anew whenever the stack's resources are created, so `up` after `destroy`
    # never asks for a name the last deployment left behind (infra/naming.py). Pulumi keeps
    # the id in the stack's state (https://www.pulumi.com/registry/packages/random/api-docs/
    # randomid/); `destroy` deletes it with the workspace.
    deployment = random.RandomId("deployment", byte_length=DEPLOYMENT_ID_BYTES)
    soft_deleted = deployment.hex.apply(lambda d: with_deployment(cfg.names, d))
    workspace_name = soft_deleted.apply(lambda n: n.workspace)
    # The storage firewall's resource-instance rule admits the workspaces of the platform group
    # (`workspaces/*`, the form the rule takes for every instance of a type in a group). Naming
    # the one workspace would make the protected outputs account depend on the deployment id
    # and the platform group, and `pulumi destroy --exclude-protected` keeps what a protected
    # resource depends on: the next deployment would then get the old, soft-deleted names.
    workspace_instances = pulumi.Output.concat(
        "/subscriptions/",
        client.subscription_id,
        "/resourceGroups/",
        cfg.names.resource_group,
        "/providers/Microsoft.MachineLearningServices/workspaces/*",
    )
    store = Storage(
        "storage",
        StorageArgs(
            cfg,
            data_group_name,
            net.training_subnet_id,
            tenant_id=client.tenant_id,
            workspace_id=workspace_instances,
        ),
    )
    registry = Registry("registry", RegistryArgs(cfg, group_name, domain))
    workspace = Workspace(
        "workspace",
        WorkspaceArgs(
            cfg,
            group_name,
            client.tenant_id,
            net.training_subnet_id,
            store.outputs_account.id,
            registry.registry.id,
            data_container=BlobContainer(
                data_group_name, store.data_account.name, store.data_container.name
            ),
            outputs_container=BlobContainer(
                data_group_name, store.outputs_account.name, store.outputs_container.name
            ),
            workspace_name=workspace_name,
            key_vault_name=soft_deleted.apply(lambda n: n.key_vault),
        ),
    )
    diagnostics.Diagnostics(
        "diagnostics",
        diagnostics.DiagnosticsArgs(
            workspace.log_analytics.id,
            diagnostics.targets(workspace, registry.registry, store),
        ),
    )
    # Deploy order (rules in azdl/review/deploy_order.py, enforced by the policy pack): a
    # compute without node public IPs is created only once the workspace's private endpoint
    # resolves in the VNet. Public stacks have no such path to wait for. (Images are built by
    # ACR Tasks, which reach a private registry through its bypass for tasks, not the VNet.)
    workspace_path: list[pulumi.Resource] = []
    if cfg.network.private:
        endpoints = [
            Endpoint("workspace", workspace.workspace.id, "amlworkspace"),
            Endpoint("keyvault", workspace.key_vault.id, "vault"),
            Endpoint("registry", registry.registry.id, "registry"),
            Endpoint("data-blob", store.data_account.id, "blob"),
            Endpoint("outputs-blob", store.outputs_account.id, "blob"),
            Endpoint("outputs-file", store.outputs_account.id, "file"),
        ]
        if store.nfs_account is not None:
            endpoints.append(Endpoint("nfs-file", store.nfs_account.id, "file"))
        private_link = PrivateLink(
            "private-link",
            PrivateLinkArgs(cfg, group_name, net.vnet_id, net.endpoint_subnet_id, endpoints),
        )
        workspace_path = private_link.private_path("workspace")
    if cfg.operators:
        OperatorAccess(
            "operators",
            OperatorAccessArgs(
                cfg,
                client.subscription_id,
                store.data_container.id,
                store.outputs_account.id,
                workspace.workspace.id,
            ),
        )
    jump_host = None
    if cfg.jump_host is not None:
        jump_host = JumpHost(
            "jump-host",
            JumpHostArgs(
                cfg,
                group_name,
                client.subscription_id,
                net.bastion_subnet.id,
                net.jump_host_subnet.id,
            ),
        )

    cluster = Cluster(
        "cluster",
        ClusterArgs(
            cfg,
            group_name,
            client.subscription_id,
            workspace.workspace.name,
            net.training_subnet_id,
            registry.registry.id,
            store.data_container.id,
            store.outputs_account.id,
            after=workspace_path,
        ),
    )

    # Images of this commit, built by ACR Tasks (or the stack's prebuilt refs), registered as
    # Azure ML environments.
    images = TrainingImages(
        "images",
        TrainingImagesArgs(
            cfg,
            group_name,
            workspace.workspace.name,
            registry,
            client.subscription_id,
            cfg.prebuilt_images,
        ),
    )
    size = cfg.cluster.vm_size
    with_jump_host = {}
    if jump_host is not None:
        with_jump_host = {"bastion_name": jump_host.bastion.name, "jump_host_id": jump_host.vm.id}
    return exported(
        resource_group_name=group_name,
        data_resource_group_name=data_group_name,
        location=cfg.location,
        subscription_id=client.subscription_id,
        workspace_name=workspace.workspace.name,
        cluster_name=cluster.compute.name,
        cluster_vm_size=size.name,
        cluster_max_nodes=cfg.cluster.max_nodes,
        gpus_per_node=size.gpus,
        infiniband=size.infiniband,
        cluster_identity_client_id=cluster.identity.client_id,
        registry_login_server=registry.confirmed_login_server,
        data_account_name=store.data_account.name,
        data_account_url=store.data_url,
        data_container_name=store.data_container.name,
        data_container_url=store.data_container_url,
        outputs_account_name=store.outputs_account.name,
        outputs_account_url=store.outputs_url,
        outputs_container_name=store.outputs_container.name,
        nfs_mount_target=store.nfs_mount_target,
        # None with network.existing (the landing zone's NSG decides).
        training_outbound=None if cfg.network.existing else cfg.network.outbound,
        data_datastore=workspace.data_datastore.name,
        outputs_datastore=workspace.outputs_datastore.name,
        **with_jump_host,
        images=images.images,
        environments=images.environments,
    )


def platform() -> SimpleNamespace:
    """azdl's platform for this stack: every resource, declared from the stack's `azdl:*`
    settings, and its outputs exported. Returned by field name (infra/exports.py,
    `StackOutputs`: `platform().resource_group_name`), as Pulumi outputs that a team's own
    resources can take (`azdl init` writes a program that does)."""
    outputs = declare(read_config())
    for key, value in outputs.items():
        pulumi.export(key, value)
    return SimpleNamespace(
        **{name: outputs[field.alias] for name, field in FIELDS.items() if field.alias in outputs}
    )


def main() -> None:
    platform()
