"""Azure names for one stack: a prefix plus a stable suffix hashed from project, stack,
subscription and group; the soft-deleted kinds (workspace, Key Vault) end in the deployment id
instead (docs/architecture.md, "Names"). Pure Python: the CLI can use it without Pulumi."""

import hashlib
import re
from dataclasses import dataclass, replace

# kind -> (pattern, the rule in words); from Azure's resource naming rules.
RULES: dict[str, tuple[re.Pattern[str], str]] = {
    "resource group": (
        re.compile(r"^[-\w.()]{0,89}[-\w()]$"),
        "1-90 letters, digits, '-', '_', '.', '(' or ')', not ending with '.'",
    ),
    "virtual network": (
        re.compile(r"^[A-Za-z0-9][-\w.]{0,62}\w$"),
        "2-64 letters, digits, '-', '_' or '.', starting with a letter or digit",
    ),
    "storage account": (re.compile(r"^[a-z0-9]{3,24}$"), "3-24 lowercase letters and digits"),
    "container registry": (re.compile(r"^[A-Za-z0-9]{5,50}$"), "5-50 letters and digits"),
    "key vault": (
        re.compile(r"^(?!.*--)[A-Za-z][A-Za-z0-9-]{1,22}[A-Za-z0-9]$"),
        "3-24 letters, digits and hyphens, starting with a letter, ending with a letter or "
        "digit, no '--'",
    ),
    "machine learning workspace": (
        re.compile(r"^[A-Za-z0-9][\w-]{2,32}$"),
        "3-33 letters, digits, '-' or '_', starting with a letter or digit",
    ),
    "compute": (
        re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,14}[A-Za-z0-9]$"),
        "2-16 letters, digits and hyphens, starting with a letter, not ending with '-'",
    ),
    "blob container": (
        re.compile(r"^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$"),
        "3-63 lowercase letters, digits and hyphens, starting and ending with a letter or "
        "digit, no '--'",
    ),
}


@dataclass(frozen=True)
class Names:
    """The Azure name of every named resource in a stack."""

    resource_group: str
    data_resource_group: str
    virtual_network: str
    log_analytics: str
    app_insights: str
    workspace: str
    cluster_identity: str
    image_build_identity: str
    data_account: str
    outputs_account: str
    nfs_account: str
    registry: str
    key_vault: str
    cluster: str
    image_build_compute: str
    nfs_share: str
    prefix: str = ""


# Which rule each name must satisfy (names built from fixed words need none beyond these).
KINDS = {
    "resource_group": "resource group",
    "data_resource_group": "resource group",
    "virtual_network": "virtual network",
    "workspace": "machine learning workspace",
    "data_account": "storage account",
    "outputs_account": "storage account",
    "nfs_account": "storage account",
    "registry": "container registry",
    "key_vault": "key vault",
    "cluster": "compute",
    "image_build_compute": "compute",
    "nfs_share": "blob container",  # file shares follow the same 3-63 lowercase rule
}


# Stands in for the suffix while the subscription is not known (config validation without
# Azure): same length, so every name rule is checked as it will be at deploy time.
PENDING_SUFFIX = "000000"


def stable_suffix(project: str, stack: str, subscription_id: str, resource_group: str) -> str:
    """Six hex digits that depend on project, stack, subscription and resource group (ids are
    case-insensitive in Azure, so those two are lowercased)."""
    seed = f"{project}/{stack}/{subscription_id.lower()}/{resource_group.lower()}"
    return hashlib.sha256(seed.encode()).hexdigest()[:6]


# Stands in for the deployment id until the deployment draws it (same length, so the name
# rules are checked as at deploy time).
PENDING_DEPLOYMENT = "000000"
DEPLOYMENT_ID_BYTES = 3  # six hex digits
# The names Azure soft-deletes, which end in the deployment id.
SOFT_DELETED = ("workspace", "key_vault")


# The CPU compute private stacks create for the workspace's image builds (a fixed name, so
# the GPU cluster may not take it: infra/config/ refuses it for cluster.name).
IMAGE_BUILD_COMPUTE = "image-build"


def derive_names(
    project: str,
    stack: str,
    prefix: str,
    cluster: str,
    subscription_id: str | None,
    pinned_suffix: str | None = None,
    deployment_id: str = PENDING_DEPLOYMENT,
    resource_groups: tuple[str, str] | None = None,
) -> Names:
    """Every name of the stack. The global names' suffix is `pinned_suffix` when the stack pins
    one, else hashed with the subscription (PENDING_SUFFIX while that is not known).
    `resource_groups`: existing (platform, data) groups the stack deploys into instead of its
    own `<prefix>-rg` and `<prefix>-data-rg`."""
    resource_group, data_resource_group = resource_groups or (f"{prefix}-rg", f"{prefix}-data-rg")
    if pinned_suffix:
        sfx = pinned_suffix
    elif subscription_id:
        sfx = stable_suffix(project, stack, subscription_id, resource_group)
    else:
        sfx = PENDING_SUFFIX
    return Names(
        resource_group=resource_group,
        data_resource_group=data_resource_group,
        virtual_network=f"{prefix}-vnet",
        log_analytics=f"{prefix}-logs",
        app_insights=f"{prefix}-appi",
        workspace=f"{prefix}-mlw-{deployment_id}",
        cluster_identity=f"{prefix}-cluster-id",
        image_build_identity=f"{prefix}-image-build-id",
        data_account=f"{prefix}data{sfx}",
        outputs_account=f"{prefix}out{sfx}",
        nfs_account=f"{prefix}nfs{sfx}",
        registry=f"{prefix}acr{sfx}",
        key_vault=f"{prefix}-kv-{deployment_id}",
        cluster=cluster,
        image_build_compute=IMAGE_BUILD_COMPUTE,
        nfs_share="training-data",
        prefix=prefix,
    )


def with_deployment(names: Names, deployment_id: str) -> Names:
    """`names` with the soft-deleted names (SOFT_DELETED) of the deployment `deployment_id`."""
    if not re.fullmatch(rf"[0-9a-f]{{{2 * DEPLOYMENT_ID_BYTES}}}", deployment_id):
        raise ValueError(
            f"a deployment id is {2 * DEPLOYMENT_ID_BYTES} hex digits, not {deployment_id!r}"
        )
    return replace(
        names,
        workspace=f"{names.prefix}-mlw-{deployment_id}",
        key_vault=f"{names.prefix}-kv-{deployment_id}",
    )


def rule_violation(kind: str, name: str) -> str | None:
    """None when `name` is valid for `kind`, else the rule in words."""
    pattern, rule = RULES[kind]
    return None if pattern.match(name) else rule
