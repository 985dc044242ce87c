"""The least-privilege deployer: which roles `pulumi up` may hand out (ASSIGNABLE_ROLES, the table
infra/role_assignments.py takes every role from), as an Azure ABAC condition in the syntax of
Azure's "Constrain roles and principal types" example
(https://learn.microsoft.com/azure/role-based-access-control/delegate-role-assignments-examples,
ms.date 2024-04-15; docs/architecture.md, "Role assignments and the deployer"). Pure data and
string work: the policy pack imports it."""

from infra.azure_facts import BUILT_IN_ROLES

ASSIGNABLE_ROLES = {
    name: BUILT_IN_ROLES[name]
    for name in ("AcrPull", "AcrPush", "AzureML Data Scientist", "Reader",
                 "Storage Blob Data Contributor", "Storage Blob Data Reader",
                 "Virtual Machine User Login")
}  # fmt: skip
# Managed identities of the cluster and image build; operators are users or groups.
ASSIGNABLE_PRINCIPAL_TYPES = ("ServicePrincipal", "User", "Group")


def rbac_condition() -> str:
    """The condition on the deployer's Role Based Access Control Administrator assignment."""
    guids = ", ".join(ASSIGNABLE_ROLES.values())
    types = ", ".join(f"'{t}'" for t in ASSIGNABLE_PRINCIPAL_TYPES)

    def clause(action: str, source: str) -> str:
        return (
            "(\n"
            f" (\n  !(ActionMatches{{'Microsoft.Authorization/roleAssignments/{action}'}})\n )\n"
            " OR\n"
            " (\n"
            f"  @{source}[Microsoft.Authorization/roleAssignments:RoleDefinitionId] "
            f"ForAnyOfAnyValues:GuidEquals {{{guids}}}\n"
            "  AND\n"
            f"  @{source}[Microsoft.Authorization/roleAssignments:PrincipalType] "
            f"ForAnyOfAnyValues:StringEqualsIgnoreCase {{{types}}}\n"
            " )\n"
            ")"
        )

    return f"{clause('write', 'Request')}\nAND\n{clause('delete', 'Resource')}"
