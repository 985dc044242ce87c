"""Role assignments: the one way the stack grants a built-in role, named by what it grants."""

import uuid

import pulumi
from pulumi_azure_native import authorization

from infra.deployer import ASSIGNABLE_ROLES


def role_assignment_name(scope: str, principal_id: str, role_definition_id: str) -> str:
    """A GUID seeded by scope, principal and role definition, as Bicep's `guid(...)` is.

    Role-assignment names are unique tenant-wide and Azure refuses to reuse one for another
    scope or principal, so the name must depend on exactly what the assignment grants: the
    same grant always gets the same name (re-runs never duplicate it), a different one never
    collides. ARM ids are case-insensitive, so they are lowercased first.
    """
    seed = "|".join(part.lower() for part in (scope, principal_id, role_definition_id))
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"azdl-role-assignment:{seed}"))


def assign_role(
    parent: pulumi.Resource,
    logical: str,
    role: str,
    principal_id: pulumi.Input[str],
    principal_type: str,
    scope: pulumi.Input[str],
    subscription_id: pulumi.Input[str],
    description: str,
) -> authorization.RoleAssignment:
    """`role` (one the deployer may assign: infra/deployer.py) for a principal on `scope`."""
    definition = pulumi.Output.concat(
        "/subscriptions/",
        subscription_id,
        "/providers/Microsoft.Authorization/roleDefinitions/",
        ASSIGNABLE_ROLES[role],
    )
    name = pulumi.Output.all(scope, principal_id, definition).apply(
        lambda a: role_assignment_name(*a)
    )
    # Azure refuses a second assignment of the same role to the same principal at the same
    # scope, so a replaced assignment (e.g. renamed) must be deleted before its successor.
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
