"""The deployer's least-privilege condition (docs/deploy.md) lists exactly the roles and principal
types the stacks assign: derived here from rendered plans, both shipped stacks and the settings
that add role assignments (operators, the jump host, a landing zone's network), so the condition
and the program cannot drift apart."""

import re
from pathlib import Path

import pytest

from infra.deployer import ASSIGNABLE_PRINCIPAL_TYPES, ASSIGNABLE_ROLES, rbac_condition
from tests.shipped import STACK_FILES
from tests.support.renderings import landing_zone, prod_with_jump_host, rendered

pytestmark = pytest.mark.slow  # the stacks and two variants, rendered (seconds)

DEPLOY_DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
ASSIGNMENT = "azure-native:authorization:RoleAssignment"
GUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@pytest.fixture(scope="module")
def plans():
    return [rendered(f) for f in STACK_FILES] + [prod_with_jump_host(), landing_zone()]


def assigned(plans) -> tuple[set[str], set[str]]:
    """(role definition GUIDs, principal types) of every role assignment in the plans."""
    roles, types = set(), set()
    for plan in plans:
        for a in plan.of_type(ASSIGNMENT):
            roles.add(a.inputs["roleDefinitionId"].rsplit("/", 1)[-1])
            types.add(a.inputs["principalType"])
    return roles, types


def documented_condition() -> str:
    text = DEPLOY_DOC.read_text()
    block = text.split("<!-- rbac-condition -->", 1)[1]
    return block.split("```text\n", 1)[1].split("\n```", 1)[0]


def test_the_condition_allows_exactly_the_roles_and_principal_types_the_plans_assign(plans):
    roles, types = assigned(plans)
    assert roles == set(ASSIGNABLE_ROLES.values())
    assert types == set(ASSIGNABLE_PRINCIPAL_TYPES)
    condition = documented_condition()
    write, delete = condition.split("\nAND\n(")
    for clause in (write, delete):
        allowed = re.search(r"GuidEquals \{([^}]*)\}", clause).group(1)
        assert set(re.findall(GUID, allowed)) == roles
        principals = re.search(r"StringEqualsIgnoreCase \{([^}]*)\}", clause).group(1)
        assert set(re.findall(r"'(\w+)'", principals)) == types
    assert "@Request[" in write and "roleAssignments/write" in write
    assert "@Resource[" in delete and "roleAssignments/delete" in delete


def test_the_docs_show_the_condition_and_roles_the_code_renders():
    assert documented_condition() == rbac_condition()
    table = DEPLOY_DOC.read_text().split("<!-- assignable-roles:", 1)[1].split("\n\n", 1)[0]
    rows = dict(re.findall(rf"\| ([^|]+?) \| `({GUID})` \|", table))
    assert rows == ASSIGNABLE_ROLES
