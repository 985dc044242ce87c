"""What `azdl plan` renders the program under (docs/architecture.md, "The mocks"): the Pulumi
SDK's mocks answering as `pulumi preview` of a new stack does, with Azure's answers to the
program's invokes and pulumi-azure-native's preview of each resource."""

from infra.mocks.azure_answers import (
    CLIENT_CONFIG,
    CLIENT_OBJECT_ID,
    SUBSCRIPTION_ID,
    TENANT_ID,
    client_config,
    stable_guid,
)
from infra.mocks.provider_preview import (
    DYNAMIC,
    RANDOM_ID,
    PreviewMocks,
    create_preview,
    preview_outputs,
    unsecret,
)

__all__ = [
    "CLIENT_CONFIG", "CLIENT_OBJECT_ID", "DYNAMIC", "RANDOM_ID", "SUBSCRIPTION_ID", "TENANT_ID",
    "PreviewMocks", "client_config", "create_preview", "preview_outputs", "stable_guid",
    "unsecret",
]  # fmt: skip
