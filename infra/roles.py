"""Azure built-in roles the stack assigns, by name: the role definition ids are fixed GUIDs, the
same in every tenant (https://learn.microsoft.com/azure/role-based-access-control/built-in-roles).

Every role a stack assigns comes from this table (infra/cluster.py for the managed identities,
infra/access.py for operators), so it is also what the least-privilege deployer may assign
(infra/deployer.py). Pure data: the policy pack imports it.
"""

BUILT_IN_ROLES = {
    "AcrPull": "7f951dda-4ed3-4680-a7ca-43fe172d538d",
    "AcrPush": "8311e382-0749-4cb8-b61a-304f252e45ec",
    "AzureML Data Scientist": "f6c7c914-8db3-469d-8ca1-694a8f32e121",
    "Reader": "acdd72a7-3385-48ef-bd42-f606fba81ae7",
    "Storage Blob Data Contributor": "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
    "Storage Blob Data Reader": "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
    "Virtual Machine User Login": "fb879df8-f326-4884-b1cf-06f3ad86be52",
}
