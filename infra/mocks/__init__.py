"""The Pulumi SDK's mocks the program runs offline under, answering as pulumi-azure-native,
Azure and the Pulumi engine would (docs/architecture.md, "The mocks"): `render` /
`render_stack_file` run the whole program for one stack and record what it declares."""

from infra.mocks.azure_answers import (
    ARM,
    CLIENT_OBJECT_ID,
    SUBSCRIPTION_ID,
    SUCCEEDED,
    TENANT_ID,
    SourceStore,
    arm_id,
)
from infra.mocks.engine import (
    CREATE,
    DYNAMIC,
    MODES,
    PREVIEW_CREATE,
    PREVIEW_UPDATE,
    RANDOM_ID,
    REPLACE,
    SAME,
    UPDATE,
    UPDATED,
    AzureMocks,
    RecordedResource,
    dynamic_provider,
)
from infra.mocks.provider_preview import STABLE_OUTPUTS, preview_outputs
from infra.mocks.recorder import Rendering, render, render_stack_file

__all__ = [
    "ARM", "CLIENT_OBJECT_ID", "CREATE", "DYNAMIC", "MODES", "PREVIEW_CREATE", "PREVIEW_UPDATE",
    "RANDOM_ID", "REPLACE", "SAME", "STABLE_OUTPUTS", "SUBSCRIPTION_ID", "SUCCEEDED", "TENANT_ID",
    "UPDATE", "UPDATED", "AzureMocks", "RecordedResource", "Rendering", "SourceStore", "arm_id",
    "dynamic_provider", "preview_outputs", "render", "render_stack_file",
]  # fmt: skip
