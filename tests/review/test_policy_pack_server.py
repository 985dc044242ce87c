"""The policy pack as Pulumi's engine meets it: `policies/__main__.py` serves the Analyzer gRPC
protocol, and the engine's own requests get the violations back. (No Pulumi CLI here; this is
the protocol `pulumi preview --policy-pack policies` speaks.)"""

import subprocess
import sys

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from azdl.envs import REPO_ROOT

pytestmark = pytest.mark.slow  # starts the pack's server (a few seconds)
STORAGE = "azure-native:storage:StorageAccount"
COMPUTE = "azure-native:machinelearningservices:Compute"


def _struct(value: dict) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


@pytest.fixture(scope="module")
def analyzer():
    pack = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "policies" / "__main__.py")],
        cwd=REPO_ROOT / "policies",
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
    assert len(info.policies) == 14
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
