"""Azure ML's REST answers as azure-rest-api-specs documents them (tests/azure/data: trimmed
copies of machinelearningservices 2024-10-01's examples Usage/list.json and
VirtualMachineSize/list.json, and of stable 2025-12-01's Compute/listNodes.json at 5485d5f, the
response's body without its nextLink; each file names its example and commit), the stack's H100
size and quota lines in the same shapes, and all of them as azure-ai-ml hands them over."""

import json
from pathlib import Path

from azure.ai.ml._restclient.arm_ml_service.models import AmlComputeNodeInformation as RestNode
from azure.ai.ml._restclient.arm_ml_service.models import Usage as RestUsage
from azure.ai.ml._restclient.arm_ml_service.models import VirtualMachineSize as RestVmSize
from azure.ai.ml.entities import AmlComputeNodeInfo, Usage, VmSize

DATA = Path(__file__).parent / "data"
H100_FAMILY_USAGE = "Standard NDSH100v5 Family Cluster Dedicated vCPUs"


def documented(name: str) -> list[dict]:
    """The `value` list of a documented listing in tests/azure/data."""
    return json.loads((DATA / name).read_text())["value"]


def h100_size() -> dict:
    """The documented VM size entry, for the stack's ND96isr_H100_v5 (family as Azure names
    it)."""
    return documented("vm_sizes_list.json")[0] | {
        "name": "Standard_ND96isr_H100_v5", "family": "standardNDSH100v5Family", "vCPUs": 96,
        "gpus": 8}  # fmt: skip


def h100_usages(used: int, limit: int = 192) -> list[dict]:
    """The regional total (1000 free) and the H100 family's line with `used` of `limit` cores,
    in the documented usage shape."""
    family = documented("usage_list.json")[1] | {
        "id": "/subscriptions/sub-1/usages/Standard_NDSH100v5_Family_Cluster_Dedicated_vCPUs",
        "currentValue": used,
        "limit": limit,
        "name": {"value": H100_FAMILY_USAGE, "localizedValue": H100_FAMILY_USAGE},
    }
    regional = documented("usage_list.json")[0] | {"currentValue": 0, "limit": 1000}
    return [regional, family]


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
