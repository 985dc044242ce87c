"""Azure's built-in role ids as Azure documents them (for the access and facts tests)."""

# Azure's built-in role ids, transcribed from the tables of
# https://learn.microsoft.com/azure/role-based-access-control/built-in-roles (ms.date
# 2026-09-10: Privileged, General, Compute, Containers, AI + machine learning, Storage). The same
# in every tenant.
DOCUMENTED_ROLE_IDS = {
    "Contributor": "b24988ac-6180-42a0-ab88-20f7382dd24c",
    "Owner": "8e3af657-a8ff-443c-a75c-2fe8c4bcb635",
    "Role Based Access Control Administrator": "f58310d9-a9f6-439a-9e8d-f62e7b41a168",
    "User Access Administrator": "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9",
    "Reader": "acdd72a7-3385-48ef-bd42-f606fba81ae7",
    "Virtual Machine User Login": "fb879df8-f326-4884-b1cf-06f3ad86be52",
    "AcrPull": "7f951dda-4ed3-4680-a7ca-43fe172d538d",
    "AcrPush": "8311e382-0749-4cb8-b61a-304f252e45ec",
    "AzureML Data Scientist": "f6c7c914-8db3-469d-8ca1-694a8f32e121",
    "Storage Blob Data Contributor": "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
    "Storage Blob Data Reader": "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
}
