"""The policy pack as Pulumi's engine meets it: started the way Pulumi's Python language host
starts a pack, `policies/__main__.py` serves the Analyzer gRPC protocol, and the engine's own
requests get the violations back. (No Pulumi CLI here; this is the protocol `pulumi preview
--policy-pack policies` speaks.)"""

import os
import subprocess
import sys
import sysconfig

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from azdl.envs import PACKAGES_ROOT

pytestmark = pytest.mark.slow  # starts the pack's server (a few seconds)
STORAGE = "azure-native:storage:StorageAccount"
COMPUTE = "azure-native:machinelearningservices:Compute"
WORKSPACE = "azure-native:machinelearningservices:Workspace"
ENDPOINT = "azure-native:network:PrivateEndpoint"
ZONE_GROUP = "azure-native:network:PrivateDnsZoneGroup"


def _struct(value: dict) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


PACK = PACKAGES_ROOT / "policies"
# How the Python language host runs a policy pack: `python -u -m pulumi.policy <engine address>
# <pack folder>`, in the pack folder (pulumi/pulumi sdk/python/cmd/pulumi-language-python/main.go,
# RunPlugin, commit f7520826, 2026-08-21); pulumi/policy/__main__.py then runs the folder's
# __main__.py with runpy.run_path, so the pack's folder is all that joins the import path.
HOST_COMMAND = [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:0", str(PACK)]


@pytest.fixture(scope="module")
def analyzer():
    pack = subprocess.Popen(
        HOST_COMMAND,
        cwd=PACK,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(pack.stdout.readline().strip())  # the pack announces its port, as for Pulumi
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        pack.terminate()
        pack.wait(timeout=30)


def test_pack_announces_every_policy_with_its_enforcement_level(analyzer):
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=60)
    assert info.name == "azdl"
    assert len(info.policies) == 26
    level = {p.name: analyzer_pb2.EnforcementLevel.Name(p.enforcementLevel) for p in info.policies}
    assert level.pop("gpu-spend-known") == "ADVISORY"
    assert set(level.values()) == {"MANDATORY"}
    assert all(p.remediation_steps for p in info.policies)


def test_pack_reports_a_resource_violation(analyzer):
    tags = {"environment": "dev", "project": "p", "owner": "o", "costCenter": "c"}
    props = {"kind": "StorageV2", "minimumTlsVersion": "TLS1_0", "allowBlobPublicAccess": False}
    request = analyzer_pb2.AnalyzeRequest(
        type=STORAGE,
        properties=_struct(props | {"tags": tags}),
        urn="urn:pulumi:dev::azdl::x::data",
        name="data",
        options=analyzer_pb2.AnalyzerResourceOptions(protect=False),
    )
    response = analyzer.Analyze(request, timeout=60)
    [diagnostic] = response.diagnostics
    assert diagnostic.policyName == "storage-minimum-tls-1-2"
    # The engine's message: the policy's description, then what the policy reported.
    assert diagnostic.message == (
        "Storage accounts accept only TLS 1.2 or later.\n"
        "storage account 'data': minimumTlsVersion is TLS1_0; TLS 1.2 is required. "
        "Fix: set minimum_tls_version='TLS1_2' on the storage account"
    )


def test_pack_checks_gpu_spend_against_the_configured_budget(analyzer):
    config = analyzer_pb2.PolicyConfig(
        enforcementLevel=analyzer_pb2.EnforcementLevel.Value("MANDATORY"),
        properties=_struct({"maxGpuSpendPerHourUsd": 100}),
    )
    analyzer.Configure(
        analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={"gpu-spend-within-budget": config}),
        timeout=60,
    )
    node = {"vmSize": "Standard_ND96isr_H100_v5", "scaleSettings": {"maxNodeCount": 4}}
    cluster = analyzer_pb2.AnalyzerResource(
        type=COMPUTE, name="compute", urn="urn:pulumi:prod::azdl::x::compute",
        properties=_struct({"properties": {"computeType": "AmlCompute", "properties": node}}),
        options=analyzer_pb2.AnalyzerResourceOptions(),
    )  # fmt: skip
    response = analyzer.AnalyzeStack(
        analyzer_pb2.AnalyzeStackRequest(resources=[cluster]), timeout=60
    )
    [diagnostic] = response.diagnostics
    assert diagnostic.policyName == "gpu-spend-within-budget"
    assert "maximum GPU spend 393.28 USD/h exceeds the budget 100.00 USD/h" in diagnostic.message


def test_pack_checks_deploy_order_on_the_dependencies_the_engine_hands_it(analyzer):
    """AnalyzeStack as the engine sends it (every resource with its provider, parent and
    dependencies): a compute without node public IPs that does not wait for the workspace's
    private endpoint's DNS zone group is refused, naming both; once it waits, it passes."""

    def urn(type_, name):
        return f"urn:pulumi:prod::azdl::{type_}::{name}"

    provider = analyzer_pb2.AnalyzerProviderResource(
        type="pulumi:providers:azure-native", name="default",
        urn=urn("pulumi:providers:azure-native", "default"))  # fmt: skip
    ws, pe = urn(WORKSPACE, "ws"), urn(ENDPOINT, "ws-pe")
    dns, cluster = urn(ZONE_GROUP, "ws-dns"), urn(COMPUTE, "compute")

    def res(type_, name, props, deps):
        return analyzer_pb2.AnalyzerResource(
            type=type_,
            name=name,
            urn=urn(type_, name),
            properties=_struct(props),
            options=analyzer_pb2.AnalyzerResourceOptions(),
            provider=provider,
            dependencies=deps,
        )

    node = {"enableNodePublicIp": False, "vmSize": "Standard_D4s_v3",
            "scaleSettings": {"maxNodeCount": 1}}  # fmt: skip
    connection = {"groupIds": ["amlworkspace"]}

    def stack(compute_deps):
        return analyzer_pb2.AnalyzeStackRequest(resources=[
            res(WORKSPACE, "ws", {"workspaceName": "ws"}, []),
            res(ENDPOINT, "ws-pe", {"privateLinkServiceConnections": [connection]}, [ws]),
            res(ZONE_GROUP, "ws-dns", {}, [pe]),
            res(COMPUTE, "compute",
                {"properties": {"computeType": "AmlCompute", "properties": node}}, compute_deps),
        ])  # fmt: skip

    response = analyzer.AnalyzeStack(stack([ws, pe]), timeout=60)
    [diagnostic] = [d for d in response.diagnostics if d.policyName.startswith("compute-after")]
    assert diagnostic.policyName == "compute-after-workspace-private-endpoint"
    assert diagnostic.urn == cluster
    assert "Compute 'compute'" in diagnostic.message
    assert "does not depend on PrivateDnsZoneGroup 'ws-dns'" in diagnostic.message
    assert "Fix: make the compute depend on" in diagnostic.message
    response = analyzer.AnalyzeStack(stack([ws, dns]), timeout=60)
    assert [d for d in response.diagnostics if d.policyName.startswith("compute-after")] == []


def test_pack_imports_the_repository_it_sits_in():
    """With only the pack's folder on the path (as under the host), no PYTHONPATH and no .pth
    files (-S: no editable install of azdl to fall back on, which may point at another
    checkout), the pack still imports azdl and infra, from its own repository."""
    site_packages = sysconfig.get_paths()["purelib"]  # pulumi_policy and the providers
    code = (
        f"import sys; sys.path.append({site_packages!r}); import rules, azdl, infra; "
        "print(len(rules.POLICIES)); print(azdl.__file__); print(infra.__file__)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-S", "-c", code], cwd=PACK, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    count, azdl_file, infra_file = result.stdout.split()
    assert count == "26"
    assert azdl_file == str(PACKAGES_ROOT / "azdl" / "__init__.py")
    assert infra_file == str(PACKAGES_ROOT / "infra" / "__init__.py")
