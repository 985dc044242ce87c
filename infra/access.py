"""Access: the roles `azdl:operators` get (OPERATOR_GRANTS; which command needs which:
COMMAND_ACCESS, rendered in docs/access.md) and the optional jump host into a private stack,
Azure Bastion plus a VM that operators sign in to with Entra ID. Why each role, with sources:
docs/architecture.md, "Operators and the jump host"."""

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import authorization, compute, network

from infra.config import Operator, StackConfig
from infra.network import standard_public_ip
from infra.role_assignments import assign_role

# What each operator gets without a jump host: (purpose, role, the resource it is granted on).
OPERATOR_GRANTS = (
    ("data-stage", "Storage Blob Data Contributor", "the training-data container"),
    ("submit", "AzureML Data Scientist", "the workspace"),
    ("workspace-storage", "Storage Blob Data Contributor",
     "the outputs account (the workspace's default storage)"),
)  # fmt: skip
# With access.jumpHost, also (purpose, role, the resource): Entra SSH login and what Bastion
# requires to open a session (bastion-connect-vm-ssh-linux, prerequisites).
JUMP_HOST_GRANTS = (
    ("login", "Virtual Machine User Login", "the jump host"),
    ("read-vm", "Reader", "the jump host"),
    ("read-nic", "Reader", "the jump host's network interface"),
    ("read-bastion", "Reader", "the Bastion host"),
)
_ROLES_DOC = "https://learn.microsoft.com/azure/machine-learning/how-to-assign-roles"
_STORAGE_DOC = (
    "https://learn.microsoft.com/azure/machine-learning/how-to-disable-local-auth-storage"
)
_BLOB_DOC = "https://learn.microsoft.com/azure/storage/blobs/assign-azure-role-data-access"
_BASTION_DOC = "https://learn.microsoft.com/azure/bastion/bastion-connect-vm-ssh-linux"
_ENTRA_SSH_DOC = (
    "https://learn.microsoft.com/entra/identity/devices/howto-vm-sign-in-azure-ad-linux"
)
# Each README command an operator runs against a stack: (command, grants by purpose, what it
# does in Azure, the documentation that says which role that takes). NO_AZURE_ROLE: the
# commands that run only on the operator's machine, and `data copy`, which runs on the nodes
# inside a job with the cluster's identity.
NO_AZURE_ROLE = ("azdl train", "azdl data sample", "azdl data prepare", "azdl data copy",
                 "azdl estimate", "azdl plan", "azdl diff", "azdl policy", "azdl init",
                 "azdl setup-training")  # fmt: skip
COMMAND_ACCESS = (
    ("azdl data stage", ("data-stage",),
     "writes shards and the manifest into the training-data container", _BLOB_DOC),
    ("azdl submit", ("submit",), "creates the job in the workspace", _ROLES_DOC),
    ("azdl submit --script", ("submit", "workspace-storage"),
     "uploads the code folder to the workspace's default storage through its identity-based "
     "datastore, then creates the job", _STORAGE_DOC),
    ("azdl submit --wait", ("submit", "workspace-storage"),
     "polls the job, then downloads its logs from the workspace's default storage", _STORAGE_DOC),
    ("azdl bench", ("submit", "workspace-storage"),
     "submits one job per node count, polls them and downloads their logs", _STORAGE_DOC),
    ("azdl data fill-nfs", ("submit",), "submits the job that copies shards onto the NFS share",
     _ROLES_DOC),
    ("azdl cluster check", ("submit", "workspace-storage"),
     "submits the health-check job, then reads its verdict from the job's logs", _STORAGE_DOC),
    ("azdl jobs list", ("submit",), "lists the workspace's jobs", _ROLES_DOC),
    ("azdl jobs show", ("submit",), "reads a job and its chain of attempts", _ROLES_DOC),
    ("azdl jobs ledger", ("submit", "workspace-storage"),
     "reads a job and its retries, then their events from the outputs container", _BLOB_DOC),
    ("azdl jobs report", ("submit", "workspace-storage"),
     "reads a job and its retries, then their events from the outputs container and a failed "
     "one's logs from the workspace's default storage (a local run's, with --events-dir: none)",
     _STORAGE_DOC),
    ("azdl jobs watch", ("submit", "workspace-storage"),
     "polls a job and its retries, reading their events from the outputs container at each poll "
     "(a local run's, with --events-dir: none)", _BLOB_DOC),
    ("azdl jobs cancel", ("submit",), "cancels a job", _ROLES_DOC),
    ("azdl jobs logs", ("submit", "workspace-storage"),
     "streams a job's logs from the workspace's default storage", _STORAGE_DOC),
    ("azdl jobs download", ("submit", "workspace-storage"),
     "downloads a job's logs and outputs (checkpoints) from the workspace's default storage "
     "and the outputs container", _STORAGE_DOC),
    ("checkpoints and TensorBoard events (az storage blob download --auth-mode login, azcopy)",
     ("workspace-storage",), "reads the outputs container", _BLOB_DOC),
    ("az network bastion ssh --auth-type AAD (with access.jumpHost)",
     ("login", "read-vm", "read-nic", "read-bastion"),
     "opens an SSH session on the jump host through Bastion, signed in with Entra ID",
     f"{_BASTION_DOC}, {_ENTRA_SSH_DOC}"),
)  # fmt: skip


def command_access_table() -> str:
    """docs/access.md's per-command table (Markdown), rendered from COMMAND_ACCESS."""
    where = {purpose: (role, scope) for purpose, role, scope in OPERATOR_GRANTS + JUMP_HOST_GRANTS}
    rows = ["| Command | Role | Scope | What it does in Azure | Source |",
            "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for command, purposes, does, source in COMMAND_ACCESS:
        roles = "<br>".join(where[p][0] for p in purposes)
        scopes = "<br>".join(where[p][1] for p in purposes)
        links = ", ".join(f"[{url.rsplit('/', 1)[-1]}]({url})" for url in source.split(", "))
        rows.append(f"| `{command}` | {roles} | {scopes} | {does} | {links} |")
    return "\n".join(rows)


# Ubuntu 24.04 LTS (Gen2) from Canonical's marketplace offer.
JUMP_HOST_IMAGE = compute.ImageReferenceArgs(
    publisher="Canonical", offer="ubuntu-24_04-lts", sku="server", version="latest"
)


def _label(operator: Operator) -> str:
    return operator.name or operator.object_id


@dataclass
class OperatorAccessArgs:
    config: StackConfig
    subscription_id: pulumi.Input[str]
    data_container_id: pulumi.Input[str]
    outputs_account_id: pulumi.Input[str]
    workspace_id: pulumi.Input[str]


class OperatorAccess(pulumi.ComponentResource):
    """The roles of `azdl:operators` (OPERATOR_GRANTS, on the resources each needs)."""

    def __init__(
        self, name: str, args: OperatorAccessArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("azdl:infra:OperatorAccess", name, None, opts)
        cfg = args.config
        scopes = {
            "data-stage": args.data_container_id,
            "submit": args.workspace_id,
            "workspace-storage": args.outputs_account_id,
        }
        needed_by = {p: ", ".join(c for c, ps, *_ in COMMAND_ACCESS if p in ps) for p in scopes}
        self.role_assignments: list[authorization.RoleAssignment] = []
        for operator in cfg.operators:
            for purpose, role, _scope in OPERATOR_GRANTS:
                self.role_assignments.append(
                    assign_role(
                        self,
                        f"operator-{operator.object_id}-{purpose}",
                        role,
                        operator.object_id,
                        operator.principal_type,
                        scopes[purpose],
                        args.subscription_id,
                        f"azdl {cfg.stack}: operator {_label(operator)}, {role} for "
                        f"{needed_by[purpose]}",
                    )
                )
        self.register_outputs({"operators": [o.object_id for o in cfg.operators]})


@dataclass
class JumpHostArgs:
    config: StackConfig
    resource_group_name: pulumi.Input[str]
    subscription_id: pulumi.Input[str]
    bastion_subnet_id: pulumi.Input[str]
    jump_host_subnet_id: pulumi.Input[str]


class JumpHost(pulumi.ComponentResource):
    """Azure Bastion (with a Standard public IP, as Bastion requires) and a Linux jump host
    without a public IP, password or role of its own; operators sign in with Entra ID."""

    def __init__(self, name: str, args: JumpHostArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("azdl:infra:JumpHost", name, None, opts)
        cfg, rg, jump = args.config, args.resource_group_name, args.config.jump_host
        child = pulumi.ResourceOptions(parent=self)
        prefix = cfg.name_prefix
        public_ip = standard_public_ip("bastion-ip", cfg, rg, f"{prefix}-bastion-ip", child)
        self.bastion = network.BastionHost(
            "bastion",
            network.BastionHostArgs(
                resource_group_name=rg,
                bastion_host_name=f"{prefix}-bastion",
                location=cfg.location,
                sku=network.SkuArgs(name=jump.bastion_sku),
                # Native-client tunnels (az network bastion ssh) need Standard or higher.
                enable_tunneling=True if jump.bastion_sku == "Standard" else None,
                ip_configurations=[
                    network.BastionHostIPConfigurationArgs(
                        name="bastion-ipconfig",
                        subnet=network.SubResourceArgs(id=args.bastion_subnet_id),
                        public_ip_address=network.SubResourceArgs(id=public_ip.id),
                    )
                ],
                tags=cfg.tags,
            ),
            child,
        )
        self.nic = network.NetworkInterface(
            "jump-host-nic",
            network.NetworkInterfaceArgs(
                resource_group_name=rg,
                network_interface_name=f"{prefix}-jump-host-nic",
                location=cfg.location,
                ip_configurations=[
                    network.NetworkInterfaceIPConfigurationArgs(
                        name="ipconfig",
                        subnet=network.SubnetArgs(id=args.jump_host_subnet_id),
                        private_ip_allocation_method="Dynamic",
                    )
                ],
                tags=cfg.tags,
            ),
            child,
        )
        self.vm = compute.VirtualMachine(
            "jump-host",
            compute.VirtualMachineArgs(
                resource_group_name=rg,
                vm_name=f"{prefix}-jump-host",
                location=cfg.location,
                hardware_profile=compute.HardwareProfileArgs(vm_size=jump.vm_size),
                identity=compute.VirtualMachineIdentityArgs(type="SystemAssigned"),
                storage_profile=compute.StorageProfileArgs(
                    image_reference=JUMP_HOST_IMAGE,
                    os_disk=compute.OSDiskArgs(
                        create_option="FromImage",
                        delete_option="Delete",
                        disk_size_gb=30,
                        managed_disk=compute.ManagedDiskParametersArgs(
                            storage_account_type="StandardSSD_LRS"
                        ),
                    ),
                ),
                os_profile=compute.OSProfileArgs(
                    computer_name=f"{prefix}-jump-host"[:64],
                    admin_username=jump.admin_username,
                    linux_configuration=compute.LinuxConfigurationArgs(
                        disable_password_authentication=True,
                        ssh=compute.SshConfigurationArgs(
                            public_keys=[
                                compute.SshPublicKeyArgs(
                                    path=f"/home/{jump.admin_username}/.ssh/authorized_keys",
                                    key_data=jump.ssh_public_key,
                                )
                            ]
                        ),
                    ),
                ),
                security_profile=compute.SecurityProfileArgs(
                    # Encrypts the temp disk and caches on the host too; the subscription must
                    # register the Microsoft.Compute/EncryptionAtHost feature (docs/deploy.md;
                    # learn.microsoft.com/azure/virtual-machines/disk-encryption).
                    encryption_at_host=True,
                    security_type="TrustedLaunch",
                    uefi_settings=compute.UefiSettingsArgs(
                        secure_boot_enabled=True, v_tpm_enabled=True
                    ),
                ),
                network_profile=compute.NetworkProfileArgs(
                    network_interfaces=[
                        compute.NetworkInterfaceReferenceArgs(id=self.nic.id, primary=True)
                    ]
                ),
                tags=cfg.tags,
            ),
            child,
        )
        # Entra ID SSH login: needs the VM's system-assigned identity
        # (learn.microsoft.com/entra/identity/devices/howto-vm-sign-in-azure-ad-linux).
        compute.VirtualMachineExtension(
            "jump-host-entra-login",
            compute.VirtualMachineExtensionArgs(
                resource_group_name=rg,
                vm_name=self.vm.name,
                vm_extension_name="AADSSHLoginForLinux",
                location=cfg.location,
                publisher="Microsoft.Azure.ActiveDirectory",
                type="AADSSHLoginForLinux",
                type_handler_version="1.0",
                auto_upgrade_minor_version=True,
                tags=cfg.tags,
            ),
            child,
        )
        self.role_assignments: list[authorization.RoleAssignment] = []
        scopes = {
            "login": self.vm.id,
            "read-vm": self.vm.id,
            "read-nic": self.nic.id,
            "read-bastion": self.bastion.id,
        }
        for operator in cfg.operators:
            for purpose, role, _where in JUMP_HOST_GRANTS:
                scope = scopes[purpose]
                self.role_assignments.append(
                    assign_role(
                        self,
                        f"operator-{operator.object_id}-jump-host-{purpose}",
                        role,
                        operator.object_id,
                        operator.principal_type,
                        scope,
                        args.subscription_id,
                        f"azdl {cfg.stack}: operator {_label(operator)}, {role} for the jump host",
                    )
                )
        self.register_outputs({"bastionId": self.bastion.id, "jumpHostId": self.vm.id})
