"""The test engine: the program run offline under the Pulumi SDK's mocks as a preview of a
create or an update, or as `pulumi up`, each resource taking the engine's step against an
earlier state, and every registration recorded (docs/architecture.md, "The mocks"). Its preview
of a create is `azdl plan`'s own (`infra.mocks.PreviewMocks`)."""

from infra.mocks import CLIENT_OBJECT_ID, DYNAMIC, RANDOM_ID, SUBSCRIPTION_ID, TENANT_ID
from tests.support.mock_engine.azure_state import ARM, SUCCEEDED, SourceStore, arm_id
from tests.support.mock_engine.engine import (
    CREATE,
    MODES,
    PREVIEW_CREATE,
    PREVIEW_UPDATE,
    REPLACE,
    SAME,
    STABLE_OUTPUTS,
    UPDATE,
    UPDATED,
    AzureMocks,
    RecordedResource,
    dynamic_provider,
)
from tests.support.mock_engine.recorder import Rendering, render, render_stack_file

__all__ = [
    "ARM", "CLIENT_OBJECT_ID", "CREATE", "DYNAMIC", "MODES", "PREVIEW_CREATE", "PREVIEW_UPDATE",
    "RANDOM_ID", "REPLACE", "SAME", "STABLE_OUTPUTS", "SUBSCRIPTION_ID", "SUCCEEDED", "TENANT_ID",
    "UPDATE", "UPDATED", "AzureMocks", "RecordedResource", "Rendering", "SourceStore", "arm_id",
    "dynamic_provider", "render", "render_stack_file",
]  # fmt: skip
