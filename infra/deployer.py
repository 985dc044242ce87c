"""The least-privilege deployer: which roles `pulumi up` may hand out, as an Azure ABAC condition.

A deploying identity that is not Owner gets Role Based Access Control Administrator with a
condition that lets it create and delete role assignments of the stack's roles only, and only
for the principal types the stack assigns to. The condition's syntax is Azure's "Constrain roles
and principal types" example (https://learn.microsoft.com/azure/role-based-access-control/
delegate-role-assignments-examples, ms.date 2024-04-15): one clause for roleAssignments/write
(request attributes), one for roleAssignments/delete (resource attributes).

ASSIGNABLE_ROLES is every role a stack can assign: the table the cluster's and image-build
identities' roles (infra/cluster.py) and the operators' and jump host's (infra/access.py) are
taken from. tests/infra/test_deployer_roles.py derives the same set from
rendered plans (both shipped stacks and the settings that add roles) and checks docs/deploy.md's
condition against it; the policy pack's `role-assignments-deployer-can-make` fails a plan that
assigns any other role. Pure data and string work: the policy pack imports it.
"""

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
