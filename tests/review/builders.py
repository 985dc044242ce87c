"""Hand-written plan manifests for the review tools' tests."""

import copy
from typing import Any

from azdl.review import manifest

TAGS = {"environment": "dev", "project": "azdl", "owner": "ml", "costCenter": "cc-1"}


def resource(type_: str, name: str, inputs: dict[str, Any], **options: Any) -> dict[str, Any]:
    key = f"{type_}::{name}"
    return {"key": key, "type": type_, "name": name, "custom": True, "parent": None,
            "dependsOn": [], "protect": False, "retainOnDelete": False,
            "inputs": inputs} | options  # fmt: skip


def storage(name: str = "data", **inputs: Any) -> dict[str, Any]:
    base = {
        "accountName": f"acct{name}",
        "kind": "BlockBlobStorage",
        "sku": {"name": "Premium_LRS"},
        "location": "westeurope",
        "resourceGroupName": "rg",
        "minimumTlsVersion": "TLS1_2",
        "allowBlobPublicAccess": False,
        "publicNetworkAccess": "Enabled",
        "networkRuleSet": {"defaultAction": "Deny", "ipRules": []},
        "tags": dict(TAGS),
    }
    return resource("azure-native:storage:StorageAccount", name, base | inputs)


def compute(name: str = "compute", size: str = "Standard_NC24ads_A100_v4", **node: Any):
    props = {
        "vmSize": size,
        "vmPriority": "Dedicated",
        "enableNodePublicIp": False,
        "remoteLoginPortPublicAccess": "Disabled",
        "scaleSettings": {"minNodeCount": 0, "maxNodeCount": 2},
    } | node
    inputs = {
        "computeName": "gpu-cluster" if name == "compute" else name,
        "workspaceName": "ws",
        "resourceGroupName": "rg",
        "location": "westeurope",
        "properties": {"computeType": "AmlCompute", "properties": props},
        "tags": dict(TAGS),
    }
    return resource("azure-native:machinelearningservices:Compute", name, inputs)


def plan(*resources: dict[str, Any], stack: str = "dev", budget: float | None = 10) -> dict:
    config = {"azdl:environment": stack}
    if budget is not None:
        config["azdl:maxGpuSpendPerHourUsd"] = budget
    return {
        "format": manifest.FORMAT,
        "project": "azdl",
        "stack": stack,
        "config": config,
        "resources": sorted(copy.deepcopy(list(resources)), key=lambda r: r["key"]),
        "outputs": {"clusterName": "gpu-cluster"},
    }
