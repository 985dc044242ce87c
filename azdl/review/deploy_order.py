"""Deploy-order rules: Azure's documented deploy-time preconditions, checked on a plan's
dependency graph as Pulumi's engine orders a deployment. The policy pack and the tests run them;
the graph's rules are in docs/architecture.md ("Review: plan, diff, cost")."""

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.azure_facts import (
    ML_COMPUTE,
    ML_WORKSPACE,
    PRIVATE_DNS_ZONE,
    PRIVATE_DNS_ZONE_GROUP,
    PRIVATE_ENDPOINT,
    UNKNOWN,
    VIRTUAL_NETWORK_LINK,
    lookup,
)


def items(props: Any, *path: str) -> list[Any]:
    """The list at `path`, [] where absent or unknown."""
    found = lookup(props, *path)
    if found is UNKNOWN or not isinstance(found, Sequence) or isinstance(found, str):
        return []
    return [lookup(found, i) for i in range(len(found))]


@dataclass(frozen=True)
class Node:
    """A resource as the dependency rules see it."""

    id: str  # URN (CrossGuard) or manifest key
    type: str
    name: str
    custom: bool
    parent: str | None
    deps: tuple[str, ...]  # direct: explicit and property dependencies
    props: Any = field(compare=False, repr=False)


class Graph:
    """The deploy-order graph of one stack."""

    def __init__(self, nodes: Iterable[Node]):
        self.nodes = {n.id: n for n in nodes}
        self._children: dict[str, list[str]] = {}
        for n in self.nodes.values():
            if n.parent:
                self._children.setdefault(n.parent, []).append(n.id)
        self._before: dict[str, frozenset[str]] = {}

    def of_type(self, *types: str) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.type in types), key=lambda n: n.id)

    def expand(self, dep: str) -> set[str]:
        """A dependency as the engine waits for it: a custom resource itself, a component as
        its descendants (custom children, and recursively the children of component children)."""
        node = self.nodes.get(dep)
        if node is None or node.custom:
            return {dep}
        found: set[str] = set()
        pending = list(self._children.get(dep, []))
        while pending:
            child = self.nodes[pending.pop()]
            if child.custom:
                found.add(child.id)
            else:
                pending.extend(self._children.get(child.id, []))
        return found

    def direct(self, node: Node) -> set[str]:
        return {d for dep in node.deps for d in self.expand(dep)}

    def before(self, node: Node) -> frozenset[str]:
        """Everything that must exist before `node` is created (transitive)."""
        if node.id in self._before:
            return self._before[node.id]
        seen: set[str] = set()
        pending = list(self.direct(node))
        while pending:
            dep = pending.pop()
            if dep in seen:
                continue
            seen.add(dep)
            if dep in self.nodes:
                pending.extend(self.direct(self.nodes[dep]) - seen)
        self._before[node.id] = frozenset(seen)
        return self._before[node.id]

    def dependents(self, target: Node, *types: str) -> list[Node]:
        """Resources of `types` that take `target` directly (e.g. the endpoints of a registry)."""
        return [n for n in self.of_type(*types) if target.id in self.direct(n)]


def waves(graph: Graph) -> list[list[Node]]:
    """The custom resources by wave: a resource's wave is the length of the longest dependency
    chain below it, so Pulumi cannot start it before every resource of the earlier waves it
    depends on exists (docs/deploy.md, "First pulumi up, in order")."""
    level: dict[str, int] = {}
    nodes = [n for n in graph.nodes.values() if n.custom]
    for node in sorted(nodes, key=lambda n: len(graph.before(n))):
        deps = [level[d] for d in graph.direct(node) if d in level]
        level[node.id] = 1 + max(deps, default=-1)
    found: list[list[Node]] = [[] for _ in range(1 + max(level.values(), default=-1))]
    for node in nodes:
        found[level[node.id]].append(node)
    return [sorted(wave, key=lambda n: (n.type, n.name)) for wave in found]


def graph_from_manifest(doc: Mapping[str, Any]) -> Graph:
    """The graph of a plan manifest (`azdl.plan/v1`)."""
    return Graph(
        Node(
            r["key"],
            r["type"],
            r["name"],
            bool(r.get("custom", True)),
            r.get("parent"),
            tuple(r.get("dependsOn", [])),
            r.get("inputs", {}),
        )
        for r in doc["resources"]
    )


def graph_from_policy_resources(resources: Iterable[Any]) -> Graph:
    """The graph of the resources CrossGuard hands a stack validation (`PolicyResource`s).

    The engine gives every custom resource a provider and no component one, which is how a
    component is told apart here."""
    nodes = []
    for r in resources:
        deps = {d.urn for d in r.dependencies}
        for refs in r.property_dependencies.values():
            deps.update(d.urn for d in refs)
        parent = r.parent.urn if r.parent is not None else None
        nodes.append(
            Node(
                r.urn,
                r.resource_type,
                r.name,
                r.provider is not None,
                parent,
                tuple(sorted(deps)),
                r.props,
            )
        )
    return Graph(nodes)


# ---- the private path to a service: endpoint, DNS zone group, the zones' VNet links ---------


def zone_name_of(zone_id: Any) -> str | None:
    """`…/privateDnsZones/privatelink.azurecr.io` -> `privatelink.azurecr.io`."""
    if isinstance(zone_id, str) and "/privatednszones/" in zone_id.lower():
        return zone_id.rstrip("/").rsplit("/", 1)[-1].lower()
    return None


@dataclass
class PrivatePath:
    """What a caller inside the VNet needs before it can reach `target` privately."""

    endpoints: list[Node]
    zone_groups: list[Node]
    links: dict[str, list[Node]]  # zone name -> its VNet links in this stack
    zones_without_link: list[str]  # zones declared in this stack that no VNet link names

    @property
    def resources(self) -> list[Node]:
        return [*self.endpoints, *self.zone_groups, *(n for ls in self.links.values() for n in ls)]


def private_path(graph: Graph, target: Node, group_id: str) -> PrivatePath:
    """The private endpoints that connect `target` (sub-resource `group_id`), their DNS zone
    groups, and the VNet links of the zones those groups register in."""
    endpoints = []
    for pe in graph.dependents(target, PRIVATE_ENDPOINT):
        connections = items(pe.props, "privateLinkServiceConnections")
        connections += items(pe.props, "manualPrivateLinkServiceConnections")
        groups = {g for c in connections for g in items(c, "groupIds")}
        if group_id in groups or not groups:  # unknown group ids: assume it is the one
            endpoints.append(pe)
    zone_groups = [g for pe in endpoints for g in graph.dependents(pe, PRIVATE_DNS_ZONE_GROUP)]
    zone_names: set[str] = set()
    declared: dict[str, Node] = {}
    for group in zone_groups:
        for config in items(group.props, "privateDnsZoneConfigs"):
            name = zone_name_of(lookup(config, "privateDnsZoneId"))
            if name:
                zone_names.add(name)
        for dep in graph.direct(group):
            zone = graph.nodes.get(dep)
            if zone is not None and zone.type == PRIVATE_DNS_ZONE:
                name = lookup(zone.props, "privateZoneName")
                name = name.lower() if isinstance(name, str) else zone.id
                zone_names.add(name)
                declared[name] = zone
    links: dict[str, list[Node]] = {}
    zones_without_link = []
    for name in sorted(zone_names):
        zone = declared.get(name)
        found = [
            link
            for link in graph.of_type(VIRTUAL_NETWORK_LINK)
            if (zone is not None and zone.id in graph.direct(link))
            or str(lookup(link.props, "privateZoneName")).lower() == name
        ]
        if found:
            links[name] = found
        elif zone is not None:
            zones_without_link.append(name)
    return PrivatePath(endpoints, zone_groups, links, zones_without_link)


# ---- the rules ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Violation:
    resource: str  # node id (URN or manifest key) of the resource created too early
    message: str


@dataclass(frozen=True)
class Rule:
    name: str  # also the policy's name in the pack
    description: str
    docs: tuple[str, ...]  # where Azure documents the precondition
    remediation: str
    find: Callable[[Graph], Iterator[tuple[Node, str]]]

    def check(self, graph: Graph) -> list[Violation]:
        return [
            Violation(node.id, f"{problem}. Fix: {self.remediation} (see {', '.join(self.docs)})")
            for node, problem in self.find(graph)
        ]


def label(node: Node) -> str:
    return f"{node.type.rsplit(':', 1)[-1]} '{node.name}'"


def _missing(graph: Graph, node: Node, path: PrivatePath) -> list[str]:
    """What `node` does not wait for: every endpoint and DNS zone group, and for each zone one
    of its VNet links (a zone resolves in the VNets linked to it; extra links, e.g. for a peered
    hub, need not come first)."""
    before = graph.before(node)
    missing = [label(n) for n in [*path.endpoints, *path.zone_groups] if n.id not in before]
    for links in path.links.values():
        if not any(link.id in before for link in links):
            missing.append(" or ".join(label(link) for link in links))
    missing += [f"a VNet link of the zone {z}" for z in path.zones_without_link]
    return missing


def _workspace_of(graph: Graph, compute: Node) -> Node | None:
    direct = graph.direct(compute)
    for ws in graph.of_type(ML_WORKSPACE):
        if ws.id in direct:
            return ws
    name = lookup(compute.props, "workspaceName")
    for ws in graph.of_type(ML_WORKSPACE):
        if isinstance(name, str) and lookup(ws.props, "workspaceName") == name:
            return ws
    return None


def _no_public_ip_computes(graph: Graph) -> Iterator[tuple[Node, str]]:
    for compute in graph.of_type(ML_COMPUTE):
        if lookup(compute.props, "properties", "properties", "enableNodePublicIp") is not False:
            continue  # public IPs (or unknown until deploy): no precondition to check
        workspace = _workspace_of(graph, compute)
        if workspace is None:
            continue  # a workspace outside this stack: its endpoint is outside it too
        path = private_path(graph, workspace, "amlworkspace")
        if not path.endpoints:
            yield (
                compute,
                (
                    f"{label(compute)} has no node public IP (enableNodePublicIp false), but "
                    f"{label(workspace)} has no private endpoint (group amlworkspace) in this "
                    "stack: Azure refuses the compute ('requires workspace private endpoint')"
                ),
            )
            continue
        missing = _missing(graph, compute, path)
        if missing:
            yield (
                compute,
                (
                    f"{label(compute)} has no node public IP, so Azure creates it only once "
                    f"the private endpoint of {label(workspace)} resolves in the VNet, but it "
                    f"does not depend on {', '.join(missing)}: Pulumi may create it first"
                ),
            )


RULES = (
    Rule(
        name="compute-after-workspace-private-endpoint",
        description="A compute with no node public IP is created after the workspace's "
        "private endpoint, its DNS zone group and the zones' VNet links.",
        docs=(
            "https://learn.microsoft.com/azure/machine-learning/how-to-secure-training-vnet",
            "https://github.com/Azure/azure-quickstart-templates/blob/master/quickstarts/"
            "microsoft.machinelearningservices/machine-learning-end-to-end-secure/modules/"
            "machinelearning.bicep",
        ),
        remediation="make the compute depend on the workspace's private endpoint (group "
        "amlworkspace), its PrivateDnsZoneGroup and the VirtualNetworkLinks of its zones "
        "(depends_on), as Microsoft's secure quickstart makes its computes depend on the "
        "workspace's networking module",
        find=_no_public_ip_computes,
    ),
)


def check(graph: Graph) -> list[Violation]:
    """Every violation of every rule, in a stable order."""
    return [v for rule in RULES for v in rule.check(graph)]
