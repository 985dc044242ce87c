"""Compute: AmlCompute nodes without public IPs or open SSH in prod, and virtual machines (the
jump host) without passwords or public IPs, encrypting at host."""

from collections.abc import Iterator

from pulumi_policy import EnforcementLevel, ResourceValidationArgs, Severity

from infra.azure_facts import ML_COMPUTE, NETWORK_INTERFACE, UNKNOWN, VIRTUAL_MACHINE, lookup

from .pack import is_prod, resource_policy


@resource_policy(
    name="compute-no-public-access-in-prod",
    description="Prod AmlCompute nodes get no public IP and no open SSH port.",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation="set enable_node_public_ip=False and remote_login_port_public_access='Disabled'",
    applies_to=(ML_COMPUTE,),
)
def _prod_compute_access(args: ResourceValidationArgs) -> Iterator[str]:
    if not is_prod(args.props):
        return
    if lookup(args.props, "properties", "computeType") != "AmlCompute":
        return
    node = lookup(args.props, "properties", "properties", default={})
    if node is UNKNOWN:
        return
    public_ip = lookup(node, "enableNodePublicIp")
    if public_ip is not False and public_ip is not UNKNOWN:
        shown = "not set (Azure's default: true)" if public_ip is None else public_ip
        yield f"compute '{args.name}' (prod): enableNodePublicIp is {shown}; nodes get public IPs"
    ssh = lookup(node, "remoteLoginPortPublicAccess")
    if ssh not in ("Disabled", UNKNOWN):
        yield (
            f"compute '{args.name}' (prod): remoteLoginPortPublicAccess is "
            f"{ssh or 'not set (NotSpecified)'}; the SSH port may be open"
        )


@resource_policy(
    name="vm-no-password-no-public-ip",
    description=(
        "Virtual machines (the jump host) take no password logins, and in prod no public IP."
    ),
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation=(
        "set linux_configuration.disable_password_authentication=True with an SSH public key, "
        "leave admin_password unset, and reach the VM through Azure Bastion (access.jumpHost)"
    ),
    applies_to=(VIRTUAL_MACHINE, NETWORK_INTERFACE),
)
def _vm_login(args: ResourceValidationArgs) -> Iterator[str]:
    """VMs (the jump host) take no password, and in prod no public IP: operators come in
    through Bastion with their Entra identity (docs/access.md)."""
    if args.resource_type == VIRTUAL_MACHINE:
        if lookup(args.props, "osProfile", "adminPassword") not in (None, UNKNOWN):
            yield f"virtual machine '{args.name}' has an admin password in its osProfile"
        linux = lookup(args.props, "osProfile", "linuxConfiguration")
        if linux not in (None, UNKNOWN):
            disabled = lookup(linux, "disablePasswordAuthentication")
            if disabled is not True and disabled is not UNKNOWN:
                yield (
                    f"virtual machine '{args.name}': disablePasswordAuthentication is "
                    f"{'not set (false)' if disabled is None else disabled}; SSH accepts passwords"
                )
    elif is_prod(args.props):
        configs = lookup(args.props, "ipConfigurations", default=[])
        if configs is UNKNOWN:
            return
        for i in range(len(configs)):
            if lookup(configs, i, "publicIPAddress") is not None:
                yield f"network interface '{args.name}' (prod) has a public IP address"


@resource_policy(
    name="vm-encryption-at-host",
    description="Virtual machines (the jump host) encrypt at host.",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    remediation=(
        "set security_profile.encryption_at_host=True and register the subscription feature "
        "Microsoft.Compute/EncryptionAtHost"
    ),
    applies_to=(VIRTUAL_MACHINE,),
)
def _vm_encryption_at_host(args: ResourceValidationArgs) -> Iterator[str]:
    """VMs encrypt their temp disk and disk caches on the host too (disk-encryption,
    "Encryption at host")."""
    enabled = lookup(args.props, "securityProfile", "encryptionAtHost")
    if enabled is not True and enabled is not UNKNOWN:
        yield (
            f"virtual machine '{args.name}': securityProfile.encryptionAtHost is "
            f"{'not set (false)' if enabled is None else enabled}"
        )
