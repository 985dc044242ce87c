"""The workspace's vCPU quota for a VM size, read before a job is submitted: a job starts only
when both its VM family and the region have its cores free (docs/architecture.md, "Quota")."""

import re
import sys
from dataclasses import dataclass

# Where a user asks for more (Azure ML docs, "Manage and increase quotas and limits").
REQUEST_MORE = (
    "request more in Azure Machine Learning studio (Quota) or the Azure portal (Quotas > "
    "Machine learning): https://learn.microsoft.com/azure/machine-learning/how-to-manage-quotas"
)
_TIER_WORD = {"dedicated": "Dedicated", "low_priority": "LowPriority"}
# The node states of AmlCompute's listNodes in which a node is the cluster's and can run the job
# (azure-rest-api-specs machinelearningservices stable 2025-12-01, `NodeState`: idle, running,
# preparing, unusable, leaving, preempted). Their cores are already in the usage figures.
_HELD_STATES = ("idle", "running", "preparing")


@dataclass(frozen=True)
class Quota:
    vm_size: str
    family: str  # the usage name, e.g. "Standard DSv2 Family Cluster Dedicated vCPUs"
    vcpus_per_node: int
    family_free: int | None  # None: no limit at the family level, or no usage line for it
    family_listed: bool  # whether Azure listed a usage line for the family
    regional_free: int | None  # None: no regional total reported, or no limit
    cluster_nodes: int = 0  # nodes the job's own cluster holds now (their cores are in use)

    @property
    def free(self) -> int | None:
        known = [v for v in (self.family_free, self.regional_free) if v is not None]
        return min(known) if known else None

    def new_cores(self, nodes: int) -> int:
        """Cores the job needs beyond what its cluster's current nodes already hold."""
        return max(0, nodes - self.cluster_nodes) * self.vcpus_per_node

    def shortfall(self, nodes: int) -> int:
        """Cores missing for `nodes` nodes (0 when the job fits)."""
        return 0 if self.free is None else max(0, self.new_cores(nodes) - self.free)


def _name(usage) -> str:
    """A usage's name.value: `Usage._from_rest_object` keeps the REST name as a dict."""
    name = usage.name
    return name.get("value", "") if isinstance(name, dict) else getattr(name, "value", "") or ""


def _field(entity, python_name: str, rest_name: str):
    """A field of a Usage or VmSize entity. azure-ai-ml 1.35's `_from_rest_object` copies the REST
    model's `as_dict()`, which keeps the wire names (`currentValue`, `vCPUs`) and leaves the
    documented attributes (`current_value`, `v_cp_us`) None; tests/azure/test_quota.py runs the
    SDK's own conversion. Either spelling is the same field; neither is an unreadable quota."""
    for name in (python_name, rest_name):
        value = getattr(entity, name, None)
        if value is not None:
            return value
    raise QuotaUnreadable(f"{type(entity).__name__} has neither {python_name} nor {rest_name}")


class QuotaUnreadable(ValueError):
    """The usage or size listing lacks a field the check needs."""


def _free(usage) -> int | None:
    if usage.limit is None or usage.limit < 0:
        return None
    return usage.limit - _field(usage, "current_value", "currentValue")


def family_key(text: str) -> str:
    """What a size's family and its usage lines have in common. Azure spells the family of a
    size (`standardDSv2Family`, `StandardNCADSA100v4Family`) and its usage name (`Standard DSv2
    Family Cluster Dedicated vCPUs`, `Standard NCADS_A100_v4 Family ...`) differently; without
    case, punctuation and the words standard/family/cluster/tier/vCPUs both read `dsv2`."""
    key = re.sub(r"[^a-z0-9]", "", text.lower()).removeprefix("standard")
    for word in ("family", "cluster", "dedicated", "lowpriority", "vcpus"):
        key = key.replace(word, "")
    return key


def held_nodes(client, cluster: str) -> int:
    """How many nodes `cluster` holds now, in a state that can take a job: its cores are counted
    in the family's and the region's usage, yet they are the cluster's own, free for this job."""
    return sum(
        1
        for node in client.compute.list_nodes(cluster)
        if _field(node, "node_state", "nodeState") in _HELD_STATES
    )


def read_quota(client, location: str | None, vm_size: str, tier: str = "dedicated",
               cluster: str | None = None) -> Quota | None:  # fmt: skip
    """The quota for `vm_size` on `tier` nodes in `location` (None: the workspace's region), or
    None when Azure lists no such size there; with `cluster`, counting the nodes it holds."""
    if tier not in _TIER_WORD:
        raise QuotaUnreadable(f"cluster tier {tier!r} is not one of {', '.join(_TIER_WORD)}")
    size = next(
        (s for s in client.compute.list_sizes(location=location) if s.name == vm_size), None
    )
    if size is None:
        return None
    word = _TIER_WORD[tier]
    family, key = f"{size.family} ({word})", family_key(size.family)
    regional = f"Total Cluster {word} Regional vCPUs"
    family_free = regional_free = None
    family_found = False
    for usage in client.compute.list_usage(location=location):
        name = _name(usage)
        if "/workspaces/" in (usage.id or ""):  # per-workspace and per-cluster breakdowns
            continue
        if name == regional:
            regional_free = _free(usage)
        elif f"Cluster {word} vCPUs" in name and family_key(name) == key:
            family, family_found, family_free = name, True, _free(usage)
    vcpus = int(_field(size, "v_cp_us", "vCPUs"))
    held = 0 if cluster is None else held_nodes(client, cluster)
    return Quota(vm_size, family, vcpus, family_free, family_found, regional_free, held)


def check(client, outputs, nodes: int) -> None:
    """Stop before submitting when the job's cores are not free; warn when they can't be read."""
    from azure.core.exceptions import AzureError, ServiceRequestError

    from azdl.errors import AzdlError

    size = outputs.vm_size.name
    try:
        cluster = outputs["clusterName"]
        tier = client.compute.get(cluster).tier or "dedicated"
        quota = read_quota(client, outputs.values.get("location"), size, tier, cluster)
    except ServiceRequestError:
        raise  # the workspace's endpoint is unreachable: the submission cannot go on either
    except (AzureError, QuotaUnreadable) as exc:
        print(
            f"warning: could not read the vCPU quota ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0]}); submitting without the check",
            file=sys.stderr,
        )
        return
    if quota is None:
        print(
            f"warning: Azure ML lists no {size} in this region's sizes; quota not checked",
            file=sys.stderr,
        )
        return
    needed = nodes * quota.vcpus_per_node
    held = ""
    if quota.cluster_nodes:
        count = min(nodes, quota.cluster_nodes)
        held = (f" ({count * quota.vcpus_per_node} held by the cluster's own {count} current "
                f"node{'s' if count > 1 else ''}, {quota.new_cores(nodes)} more)")  # fmt: skip
    if not quota.family_listed:
        print(
            f"warning: Azure ML reports no usage for {quota.family!r}; only the regional "
            "total is checked",
            file=sys.stderr,
        )
    if quota.shortfall(nodes):
        raise AzdlError(
            f"the job cannot start: {nodes} x {size} needs {needed} vCPUs of {quota.family}"
            f"{held}, and {quota.free} are free (family: {_text(quota.family_free)}, region total: "
            f"{_text(quota.regional_free)}); it would wait in the queue. Use fewer --nodes, or "
            f"{REQUEST_MORE}"
        )
    print(
        f"quota: {needed} vCPUs needed{held}, {_text(quota.free)} free ({quota.family})",
        file=sys.stderr,
    )


def _text(free: int | None) -> str:
    return "no limit" if free is None else str(free)
