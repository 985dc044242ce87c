"""The REST API's documented responses as azure-ai-ml hands them over (tests/azure/data: trimmed
copies of azure-rest-api-specs' machinelearningservices 2024-10-01 examples Usage/list.json and
VirtualMachineSize/list.json, and of stable 2025-12-01's Compute/listNodes.json at 5485d5f, the
response's body without its nextLink), for the quota and estimate tests."""

import json
from pathlib import Path

from azure.ai.ml._restclient.arm_ml_service.models import AmlComputeNodeInformation as RestNode
from azure.ai.ml._restclient.arm_ml_service.models import Usage as RestUsage
from azure.ai.ml._restclient.arm_ml_service.models import VirtualMachineSize as RestVmSize
from azure.ai.ml.entities import AmlComputeNodeInfo, Usage, VmSize

DATA = Path(__file__).parent / "data"


def documented(name: str) -> list[dict]:
    return json.loads((DATA / name).read_text())["value"]


def sdk_usages(entries=None) -> list[Usage]:
    """Usage entities as MLClient.compute.list_usage returns them (azure-ai-ml 1.35's
    `Usage._from_rest_object` of each REST item)."""
    return [Usage._from_rest_object(RestUsage(e)) for e in entries or documented("usage_list.json")]


def sdk_sizes(entries=None) -> list[VmSize]:
    entries = entries or documented("vm_sizes_list.json")
    return [VmSize._from_rest_object(RestVmSize(e)) for e in entries]


def sdk_nodes(states=None) -> list[AmlComputeNodeInfo]:
    """A cluster's nodes as MLClient.compute.list_nodes returns them (azure-ai-ml 1.35's
    `AmlComputeNodeInfo._from_rest_object`): the documented two (running, idle), or one of the
    documented node for each state in `states`."""
    nodes = json.loads((DATA / "compute_list_nodes.json").read_text())["nodes"]
    if states is not None:
        nodes = [nodes[1] | {"nodeId": f"tvm-{i}", "nodeState": s} for i, s in enumerate(states)]
    return [AmlComputeNodeInfo._from_rest_object(RestNode(n)) for n in nodes]
