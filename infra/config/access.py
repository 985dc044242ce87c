"""`azdl:operators` and `azdl:access`: who runs the operator commands, and the jump host."""

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

from infra.config.fields import (
    GUID,
    Cidr,
    Invalid,
    Section,
    Str,
    matching,
    one_of,
    rule,
    setting,
)

PRINCIPAL_TYPES = ("User", "Group")  # what an operator's Entra object id names
BASTION_SKUS = ("Basic", "Standard")  # Standard: native-client (az network bastion ssh) tunnels
# Azure's reserved admin user names for Linux VMs (the OSProfile adminUsername rule).
RESERVED_ADMIN_NAMES = frozenset(
    ("administrator", "admin", "user", "user1", "test", "user2", "test1", "user3", "admin1", "1",
     "123", "a", "actuser", "adm", "admin2", "aspnet", "backup", "console", "david", "guest",
     "john", "owner", "root", "server", "sql", "support", "support_388945a0", "sys", "test2",
     "test3", "user4", "user5")
)  # fmt: skip
SSH_KEY_TYPES = ("ssh-rsa", "ssh-ed25519")  # what Azure Linux VMs accept


def _prefix_of(cidr: int, largest: str) -> Any:
    return rule(lambda net: net.prefixlen <= cidr, largest, shown=str)


class Operator(Section):
    """A person or group that runs `azdl data stage`, `azdl submit` and `azdl bench`."""

    object_id: Annotated[matching(GUID, "a Microsoft Entra object id, a GUID such as "
        "00000000-0000-0000-0000-000000000000 (az ad user show --id <upn> --query id; az ad "
        "group show -g <name> --query id)"), AfterValidator(str.lower)] = setting(
        "The user's or group's Entra object id.",
        allowed="a GUID",
        example="00000000-0000-0000-0000-000000000000",
    )  # fmt: skip
    principal_type: one_of(PRINCIPAL_TYPES) = setting("What the object id names.", example="Group")
    name: Str = setting("A label for people reading the plan.", "")


def _operator_list(raw: Any) -> Any:
    if not isinstance(raw, list):
        raise Invalid(raw, "a list of {objectId: <Entra object id>, principalType: User|Group, "
                      "name: <label>}")  # fmt: skip
    return raw


def _each_operator_once(operators: tuple[Operator, ...]) -> tuple[Operator, ...]:
    seen = set()
    for i, operator in enumerate(operators):
        if operator.object_id in seen:
            raise Invalid(operator.object_id, "each operator once", f"[{i}].objectId")
        seen.add(operator.object_id)
    return operators


Operators = Annotated[
    tuple[Operator, ...], BeforeValidator(_operator_list), AfterValidator(_each_operator_once)
]


def _ssh_public_key(text: str) -> str:
    key = text.strip()
    if "PRIVATE KEY" in key:
        raise Invalid("<a private key: not shown>", "the PUBLIC key (the .pub file); a private "
                      "key must never be in a stack file")  # fmt: skip
    parts = key.split()
    base64_body = len(parts) >= 2 and re.fullmatch(r"[A-Za-z0-9+/=]+", parts[1])
    if len(parts) < 2 or parts[0] not in SSH_KEY_TYPES or not base64_body:
        raise Invalid(key[:40] + ("…" if len(key) > 40 else ""), "an OpenSSH public key line "
                      f"starting with {' or '.join(SSH_KEY_TYPES)}")  # fmt: skip
    return key


class JumpHostConfig(Section):
    """`access.jumpHost`: Azure Bastion plus a small Linux VM inside the stack's VNet."""

    bastion_subnet: Annotated[Cidr, _prefix_of(26, "a /26 or larger (Azure Bastion's "
        "AzureBastionSubnet must be at least /26)")] = setting(
        "AzureBastionSubnet's range.",
        allowed="a /26 or larger inside network.addressSpace, overlapping no other subnet",
        example="10.50.17.0/26",
    )  # fmt: skip
    jump_host_subnet: Annotated[Cidr, _prefix_of(29, "a /29 or larger")] = setting(
        "The jump host's subnet.",
        allowed="a /29 or larger inside network.addressSpace, overlapping no other subnet",
        example="10.50.18.0/29",
    )
    vm_size: matching(r"Standard_[A-Za-z0-9_]+", "an Azure VM size such as Standard_B2s") = setting(
        "The jump host's VM size.", "Standard_B2s"
    )
    admin_username: Annotated[
        Str,
        rule(
            lambda name: (
                re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", name) and name not in RESERVED_ADMIN_NAMES
            ),
            "a Linux user name (lowercase letters, digits, '_' or '-', at most 32) that Azure does "
            "not reserve (not admin, root, administrator, user, ...)",
        ),
    ] = setting(
        "The break-glass admin's Linux user name.",
        "azdladmin",
        allowed="a Linux user name Azure does not reserve",
    )
    ssh_public_key: Annotated[Str, AfterValidator(_ssh_public_key)] = setting(
        "The break-glass admin's SSH public key (never a private key); operators sign in with "
        "Entra ID.",
        allowed="an ssh-rsa or ssh-ed25519 public key line",
        example="ssh-ed25519 AAAA... admin",
    )
    bastion_sku: one_of(BASTION_SKUS) = setting(
        "Standard allows native-client tunnels (az network bastion ssh).", "Standard"
    )


class AccessSettings(Section):
    """How operators reach a private stack (docs/access.md)."""

    jump_host: JumpHostConfig = setting(
        "Azure Bastion plus a Linux jump host with Entra ID login in the stack's VNet; not with "
        "network.existing.",
        default_words="none: no Bastion, no jump host",
    )
