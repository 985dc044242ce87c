"""Role assignments: least privilege, and only what the deployer's condition lets it make."""

from collections.abc import Iterator

from pulumi_policy import EnforcementLevel, ResourceValidationArgs, Severity

from infra.azure_facts import BUILT_IN_ROLES, ROLE_ASSIGNMENT, lookup
from infra.deployer import ASSIGNABLE_PRINCIPAL_TYPES, ASSIGNABLE_ROLES

from .pack import resource_policy

# Built-in roles that can change resources or hand out access: role id -> name.
PRIVILEGED_ROLES = {
    BUILT_IN_ROLES[name]: name
    for name in ("Owner", "Contributor", "User Access Administrator",
                 "Role Based Access Control Administrator")
}  # fmt: skip


@resource_policy(
    name="role-assignments-least-privilege",
    description="No Owner/Contributor-class roles and no scope above a resource group.",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation=(
        "grant a data-plane role (AcrPull, Storage Blob Data Reader/Contributor) on the one "
        "resource that needs it"
    ),
    applies_to=(ROLE_ASSIGNMENT,),
)
def _role_breadth(args: ResourceValidationArgs) -> Iterator[str]:
    role_id = lookup(args.props, "roleDefinitionId")
    if isinstance(role_id, str):
        role = PRIVILEGED_ROLES.get(role_id.rstrip("/").rsplit("/", 1)[-1].lower())
        if role:
            yield (
                f"role assignment '{args.name}' grants {role}; the cluster identity needs only "
                "data-plane roles (AcrPull, Storage Blob Data Reader/Contributor)"
            )
    scope = lookup(args.props, "scope")
    if isinstance(scope, str) and "/resourcegroups/" not in scope.lower():
        yield (
            f"role assignment '{args.name}' is scoped above a resource group (a subscription, "
            f"management group or the tenant root: {scope})"
        )


@resource_policy(
    name="role-assignments-deployer-can-make",
    description=(
        "Role assignments use only the roles and principal types the least-privilege deployer's "
        "condition allows."
    ),
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation=(
        "take the role from ASSIGNABLE_ROLES in infra/deployer.py (which the condition in "
        "docs/deploy.md is generated from) and set principalType to ServicePrincipal, User or "
        "Group"
    ),
    applies_to=(ROLE_ASSIGNMENT,),
)
def _deployer_can_assign(args: ResourceValidationArgs) -> Iterator[str]:
    """The least-privilege deployer's condition (docs/deploy.md, infra/deployer.py) lets it
    assign only the stack's roles to managed identities, users and groups: any other role or
    principal type in the plan fails at deploy time with AuthorizationFailed."""
    role_id = lookup(args.props, "roleDefinitionId")
    if isinstance(role_id, str):
        guid = role_id.rstrip("/").rsplit("/", 1)[-1].lower()
        if guid not in ASSIGNABLE_ROLES.values():
            yield (
                f"role assignment '{args.name}' grants role {guid}, which the deployer's "
                "role-assignment condition does not allow"
            )
    kind = lookup(args.props, "principalType")
    if isinstance(kind, str) and kind not in ASSIGNABLE_PRINCIPAL_TYPES:
        yield (
            f"role assignment '{args.name}' is for a {kind}; the deployer's condition allows "
            f"{', '.join(ASSIGNABLE_PRINCIPAL_TYPES)}"
        )
