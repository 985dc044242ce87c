"""The registry's login server against the cloud the provider really deploys to: derived from
`azure-native:environment` (infra/registry.py), and, once the registry exists, confirmed by its
`properties.loginServer`. With Azure CLI sign-in and no setting, the provider takes the CLI's
cloud (pulumi-azure-native auth_azidentity.go, `NewAzCoreIdentity`, commit 015fcf2): in US
Government the registry answers `<name>.azurecr.us` (go-autorest environments.go,
ContainerRegistryDNSSuffix, commit 13ddd34) while azdl derived `.azurecr.io`."""

from pathlib import Path

import pytest

from infra import registry
from infra.config import read_stack_file
from tests.support import mock_engine as mocks

# Registries_Get's documented answer (azure-rest-api-specs, specification/containerregistry/
# resource-manager/Microsoft.ContainerRegistry/Registry/stable/2025-11-01/examples/
# RegistryGet.json, commit 1ff559f): the name keeps its case in `loginServer`.
DOCUMENTED = {"name": "myRegistry", "properties": {"loginServer": "myRegistry.azurecr.io"}}
DEV = Path(__file__).resolve().parents[2] / "stacks" / "Pulumi.dev.yaml"
TASK_RUN = "azure-native:containerregistry:TaskRun"
ENV_VERSION = "azure-native:machinelearningservices:EnvironmentVersion"


def derived(domain: str) -> str:
    return registry.login_server(DOCUMENTED["name"], domain)


def test_azures_answer_confirms_the_derived_name_whatever_its_case():
    public = derived("azurecr.io")
    assert registry.confirmed_login_server(public, DOCUMENTED["properties"], False) == public


def test_a_registry_in_another_cloud_stops_up_in_one_line():
    with pytest.raises(registry.LoginServerMismatch) as stopped:
        registry.confirmed_login_server(derived("azurecr.us"), DOCUMENTED["properties"], False)
    message = str(stopped.value)
    assert "\n" not in message
    assert message.startswith(
        "the registry's login server is myRegistry.azurecr.io, not myregistry.azurecr.us, the "
        "name azdl derived for the usgovernment cloud"
    )
    assert "`pulumi config set azure-native:environment <public|usgovernment|china>`" in message


def test_a_preview_takes_the_derived_name_and_an_answer_without_one_stops():
    """In a preview the provider answers the registry's properties without loginServer."""
    assert (
        registry.confirmed_login_server(derived("azurecr.io"), {}, True) == "myregistry.azurecr.io"
    )
    with pytest.raises(registry.LoginServerMismatch, match="login server is None"):
        registry.confirmed_login_server(derived("azurecr.io"), {"adminUserEnabled": False}, False)


class CliInUsGovernment(mocks.AzureMocks):
    """The provider signed in with an Azure CLI set to US Government, no azure-native:environment:
    Azure answers the registry with its US Government login server."""

    def _answer(self, typ, name, inputs):
        rid, state = super()._answer(typ, name, inputs)
        server = (state.get("properties") or {}).get("loginServer", "")
        if typ == "azure-native:resources:Resource" and server.endswith(".azurecr.io"):
            state["properties"]["loginServer"] = server.removesuffix(".io") + ".us"
        return rid, state


@pytest.mark.slow  # renders the dev stack (seconds)
def test_up_in_another_cloud_stops_before_any_build_or_environment():
    engine = CliInUsGovernment()
    with pytest.raises(registry.LoginServerMismatch, match=r"\.azurecr\.us, not .*\.azurecr\.io"):
        mocks.render(read_stack_file(DEV), "dev", mocks=engine)
    declared = {r.type for r in engine.resources}
    assert "azure-native:resources:Resource" in declared  # the registry exists
    assert TASK_RUN not in declared and ENV_VERSION not in declared
