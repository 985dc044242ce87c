"""Access: the roles `azdl:operators` get, and the optional way into a private stack.

Operators are Microsoft Entra users or groups. Each gets exactly what the operator commands
need, on the one resource that needs it (role ids: Azure's built-in roles,
https://learn.microsoft.com/azure/role-based-access-control/built-in-roles):

- `azdl data stage` writes shards into the training-data container: Storage Blob Data
  Contributor on that container;
- `azdl submit` and `azdl bench` submit jobs and poll them in the workspace: AzureML Data
  Scientist on the workspace (every workspace action except creating compute and changing the
  workspace: learn.microsoft.com/azure/machine-learning/how-to-assign-roles);
- `azdl submit --wait` and `azdl bench` download the jobs' logs from the workspace's default
  storage, the outputs account: Storage Blob Data Reader on that account.

`access.jumpHost` adds Azure Bastion and a small Linux VM in the stack's VNet, for a team with
no VPN or peered network yet, as Microsoft's secure Azure ML quickstart does
(Azure/azure-quickstart-templates, quickstarts/microsoft.machinelearningservices/
machine-learning-end-to-end-secure, modules/bastion.bicep and dsvmjumpbox.bicep), but with no
password: operators sign in with their Entra identity through the AADSSHLoginForLinux extension
(learn.microsoft.com/entra/identity/devices/howto-vm-sign-in-azure-ad-linux), which needs the
VM's system-assigned identity and gives them Virtual Machine User Login on the VM; Bastion needs
Reader on the bastion, the VM and its NIC (learn.microsoft.com/azure/bastion/
bastion-connect-vm-ssh-linux, prerequisites). The VM's own identity gets no role. The SSH public
key in the stack is only the admin's break-glass login (Azure requires one way to sign in).
"""

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import authorization, compute, network

from infra.cluster import role_assignment_name
from infra.config import Operator, StackConfig
from infra.network import standard_public_ip

# Built-in role definition ids (the same GUIDs in every tenant).
OPERATOR_ROLES = {
    "Storage Blob Data Contributor": "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
    "Storage Blob Data Reader": "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
    "AzureML Data Scientist": "f6c7c914-8db3-469d-8ca1-694a8f32e121",
    "Virtual Machine User Login": "fb879df8-f326-4884-b1cf-06f3ad86be52",
    "Reader": "acdd72a7-3385-48ef-bd42-f606fba81ae7",
}
# What each operator gets without a jump host: (purpose, role, the command that needs it).
OPERATOR_GRANTS = (
    ("data-stage", "Storage Blob Data Contributor", "azdl data stage"),
    ("submit", "AzureML Data Scientist", "azdl submit, azdl bench"),
    ("read-logs", "Storage Blob Data Reader", "azdl submit --wait, azdl bench"),
)
# Ubuntu 24.04 LTS (Gen2) from Canonical's marketplace offer.
JUMP_HOST_IMAGE = compute.ImageReferenceArgs(
    publisher="Canonical", offer="ubuntu-24_04-lts", sku="server", version="latest"
)


def grant(
    parent: pulumi.Resource,
    logical: str,
    role: str,
    principal_id: pulumi.Input[str],
    principal_type: str,
    scope: pulumi.Input[str],
    subscription_id: pulumi.Input[str],
    description: str,
) -> authorization.RoleAssignment:
    """A role assignment with a deterministic GUID name (see cluster.role_assignment_name)."""
    definition = pulumi.Output.concat(
        "/subscriptions/",
        subscription_id,
        "/providers/Microsoft.Authorization/roleDefinitions/",
        OPERATOR_ROLES[role],
    )
    name = pulumi.Output.all(scope, principal_id, definition).apply(
        lambda a: role_assignment_name(*a)
    )
    return authorization.RoleAssignment(
        logical,
        authorization.RoleAssignmentArgs(
            role_assignment_name=name,
            principal_id=principal_id,
            principal_type=principal_type,
            role_definition_id=definition,
            scope=scope,
            description=description,
        ),
        pulumi.ResourceOptions(parent=parent, delete_before_replace=True),
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
    """The roles of `azdl:operators` (see the module docstring)."""

    def __init__(
        self, name: str, args: OperatorAccessArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("azdl:infra:OperatorAccess", name, None, opts)
        cfg = args.config
        scopes = {
            "data-stage": args.data_container_id,
            "submit": args.workspace_id,
            "read-logs": args.outputs_account_id,
        }
        self.role_assignments: list[authorization.RoleAssignment] = []
        for operator in cfg.operators:
            for purpose, role, commands in OPERATOR_GRANTS:
                self.role_assignments.append(
                    grant(
                        self,
                        f"operator-{operator.object_id}-{purpose}",
                        role,
                        operator.object_id,
                        operator.principal_type,
                        scopes[purpose],
                        args.subscription_id,
                        f"azdl {cfg.stack}: operator {_label(operator)}, {role} for {commands}",
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
        targets = (
            ("login", "Virtual Machine User Login", self.vm.id),
            ("read-vm", "Reader", self.vm.id),
            ("read-nic", "Reader", self.nic.id),
            ("read-bastion", "Reader", self.bastion.id),
        )
        for operator in cfg.operators:
            for purpose, role, scope in targets:
                self.role_assignments.append(
                    grant(
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
