"""Azure's documented deploy-time preconditions as rules over a plan's dependency graph
(azdl/review/deploy_order.py): the shipped stacks keep them, a plan with one edge removed breaks
them with a message naming both resources, and the policy pack enforces the very same rules
(offline through `azdl policy`'s runner, and through the Analyzer protocol in
test_policy_pack_server.py)."""

import copy

import pytest

from azdl.review import deploy_order as do
from azdl.review.policy import check
from infra.azure_facts import ML_COMPUTE, ML_WORKSPACE, lookup
from tests.review.builders import compute, plan, resource

AZ = "azure-native:"
PL = "azdl:infra:PrivateLink$"


def violations(doc: dict) -> list[do.Violation]:
    return do.check(do.graph_from_manifest(doc))


def key_of(doc: dict, type_: str, name: str) -> str:
    [key] = [r["key"] for r in doc["resources"] if r["type"] == type_ and r["name"] == name]
    return key


def by_key(doc: dict, key: str) -> dict:
    return next(r for r in doc["resources"] if r["key"] == key)


# ---- the shipped stacks ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_keep_every_deploy_order_rule(shipped_plans, stack):
    assert violations(shipped_plans[stack]) == []


@pytest.mark.slow
def test_the_rules_bite_on_prod_every_no_public_ip_compute(shipped_plans):
    """Not vacuous: in prod both computes have a private path to wait for. (Images are built
    by ACR Tasks, outside the VNet: nothing of theirs waits for the registry's endpoint.)"""
    graph = do.graph_from_manifest(shipped_plans["prod"])
    computes = graph.of_type(ML_COMPUTE)
    assert {c.name for c in computes} == {"compute", "image-build"}
    [workspace] = graph.of_type(ML_WORKSPACE)
    path = do.private_path(graph, workspace, "amlworkspace")
    assert [n.name for n in path.resources] == [
        "workspace-pe",
        "workspace-dns",
        "privatelink.api.azureml.ms-link",
        "privatelink.notebooks.azure.net-link",
    ]
    for c in computes:
        assert lookup(c.props, "properties", "properties", "enableNodePublicIp") is False
        assert {n.id for n in path.resources} <= graph.before(c)


@pytest.mark.slow
def test_waves_order_prod_as_docs_deploy_md_states(shipped_plans):
    graph = do.graph_from_manifest(shipped_plans["prod"])
    found = do.waves(graph)
    wave = {(n.type.rsplit(":", 1)[-1], n.name): i for i, w in enumerate(found) for n in w}
    for i, w in enumerate(found):  # nothing depends on its own or a later wave
        for node in w:
            assert all(wave_of < i for wave_of in (
                wave[(graph.nodes[d].type.rsplit(":", 1)[-1], graph.nodes[d].name)]
                for d in graph.direct(node) if d in graph.nodes and graph.nodes[d].custom
            )), node.name  # fmt: skip
    # the groups, and the deployment id the soft-deleted names end in (infra/naming.py)
    assert {n.type.rsplit(":", 1)[-1] for n in found[0]} == {"ResourceGroup", "RandomId"}
    last_dns = max(v for (t, _), v in wave.items() if t == "PrivateDnsZoneGroup")
    for key in [("Compute", "compute"), ("Compute", "image-build")]:
        assert wave[key] > last_dns and wave[key] > wave[("Workspace", "workspace")], key
    assert (
        wave[("EnvironmentVersion", "pytorch-environment-version")]
        > wave[("TaskRun", "pytorch-build")]
        > wave[("Resource", "registry")]
    )


# What a no-public-IP compute waits for in prod; removing one of these
# edges leaves nothing else that leads there (the endpoint itself stays reachable through its
# DNS zone group, see the next test).
EDGES = [
    (("machinelearningservices:Compute", name), ("network:PrivateDnsZoneGroup", "workspace-dns"))
    for name in ("compute", "image-build")
] + [
    (("machinelearningservices:Compute", "compute"),
     ("privatedns:VirtualNetworkLink", "privatelink.api.azureml.ms-link")),
    (("machinelearningservices:Compute", "image-build"),
     ("privatedns:VirtualNetworkLink", "privatelink.notebooks.azure.net-link")),
]  # fmt: skip


def _type(short: str) -> str:
    return AZ + short


@pytest.mark.slow
@pytest.mark.parametrize(("dependent", "required"), EDGES, ids=lambda e: "/".join(e))
def test_a_plan_with_one_edge_removed_fails_naming_both_resources(
    shipped_plans, dependent, required
):
    doc = copy.deepcopy(shipped_plans["prod"])
    dependent_key = key_of(doc, _type(dependent[0]), dependent[1])
    required_key = key_of(doc, _type(required[0]), required[1])
    deps = by_key(doc, dependent_key)["dependsOn"]
    assert required_key in deps
    deps.remove(required_key)
    [violation] = violations(doc)
    assert violation.resource == dependent_key
    assert f"'{dependent[1]}'" in violation.message
    assert f"{required[0].rsplit(':', 1)[-1]} '{required[1]}'" in violation.message
    assert "Fix: make the" in violation.message and "https://" in violation.message
    # The policy pack reports the same finding, on the same resource, as mandatory.
    [finding] = [f for f in check(doc) if f.mandatory]
    assert (finding.resource, finding.message) == (dependent_key, violation.message)
    assert finding.policy in {r.name for r in do.RULES}


@pytest.mark.slow
def test_dependencies_count_transitively(shipped_plans):
    """The compute need not name the endpoint: its DNS zone group depends on it."""
    doc = copy.deepcopy(shipped_plans["prod"])
    compute_key = key_of(doc, AZ + "machinelearningservices:Compute", "compute")
    endpoint = key_of(doc, AZ + "network:PrivateEndpoint", "workspace-pe")
    by_key(doc, compute_key)["dependsOn"].remove(endpoint)
    assert violations(doc) == []


# ---- the rules on hand-written plans ---------------------------------------------------------


def private_workspace_plan(compute_deps: list[str], *, with_link: bool = True) -> dict:
    """A workspace with a private endpoint, zone group and zone (linked unless told), and a
    compute without node public IPs depending on `compute_deps`."""
    ws = resource(AZ + "machinelearningservices:Workspace", "ws", {"workspaceName": "ws"})
    pe = resource(AZ + "network:PrivateEndpoint", "ws-pe", {
        "privateLinkServiceConnections": [{"groupIds": ["amlworkspace"],
                                           "privateLinkServiceId": {"$unknown": [ws["key"]]}}]},
        dependsOn=[ws["key"]])  # fmt: skip
    zone = resource(AZ + "privatedns:PrivateZone", "zone",
                    {"privateZoneName": "privatelink.api.azureml.ms"})  # fmt: skip
    group = resource(AZ + "network:PrivateDnsZoneGroup", "ws-dns", {
        "privateDnsZoneConfigs": [{"privateDnsZoneId": {"$unknown": [zone["key"]]}}]},
        dependsOn=[pe["key"], zone["key"]])  # fmt: skip
    link = resource(
        AZ + "privatedns:VirtualNetworkLink",
        "zone-link",
        {"privateZoneName": "privatelink.api.azureml.ms"},
        dependsOn=[zone["key"]],
    )
    cluster = compute()
    cluster["dependsOn"] = [ws["key"], *compute_deps]
    found = [ws, pe, zone, group, cluster] + ([link] if with_link else [])
    return plan(*found)


PE_KEY = AZ + "network:PrivateEndpoint::ws-pe"
GROUP_KEY = AZ + "network:PrivateDnsZoneGroup::ws-dns"
LINK_KEY = AZ + "privatedns:VirtualNetworkLink::zone-link"


def test_a_compute_after_its_workspace_private_path_passes():
    assert violations(private_workspace_plan([GROUP_KEY, LINK_KEY])) == []


def test_a_compute_before_the_zone_group_fails_with_the_documented_reason():
    [v] = violations(private_workspace_plan([PE_KEY, LINK_KEY]))
    assert v.resource == AZ + "machinelearningservices:Compute::compute"
    assert "Compute 'compute' has no node public IP" in v.message
    assert "does not depend on PrivateDnsZoneGroup 'ws-dns'" in v.message
    assert "how-to-secure-training-vnet" in v.message


def test_one_vnet_link_per_zone_is_enough():
    """Extra links (a peered hub's) need not come first: the zone resolves in the VNet once
    one link exists."""
    doc = private_workspace_plan([GROUP_KEY, LINK_KEY])
    hub = resource(AZ + "privatedns:VirtualNetworkLink", "hub-link", {},
                   dependsOn=[AZ + "privatedns:PrivateZone::zone"])  # fmt: skip
    doc["resources"].append(hub)
    assert violations(doc) == []
    by_key(doc, AZ + "machinelearningservices:Compute::compute")["dependsOn"].remove(LINK_KEY)
    [v] = violations(doc)
    assert "VirtualNetworkLink 'hub-link' or VirtualNetworkLink 'zone-link'" in v.message


def test_a_zone_declared_without_any_vnet_link_is_reported():
    [v] = violations(private_workspace_plan([GROUP_KEY], with_link=False))
    assert "a VNet link of the zone privatelink.api.azureml.ms" in v.message


def test_a_compute_with_node_public_ips_has_no_such_precondition():
    doc = private_workspace_plan([])
    node = by_key(doc, AZ + "machinelearningservices:Compute::compute")
    node["inputs"]["properties"]["properties"]["enableNodePublicIp"] = True
    assert violations(doc) == []


def test_a_no_public_ip_compute_in_a_workspace_without_private_endpoint_is_refused():
    ws = resource(AZ + "machinelearningservices:Workspace", "ws", {"workspaceName": "ws"})
    cluster = compute()
    cluster["dependsOn"] = [ws["key"]]
    [v] = violations(plan(ws, cluster))
    assert "has no private endpoint (group amlworkspace)" in v.message


def test_a_component_dependency_stands_for_its_custom_descendants():
    """Depending on a component waits for its children (as the Pulumi SDKs expand it); a
    custom resource's children are not waited for."""
    doc = private_workspace_plan(["azdl:infra:Net::net"])
    net = resource("azdl:infra:Net", "net", {}, custom=False)
    inner = resource("azdl:infra:Dns", "dns", {}, custom=False, parent=net["key"])
    by_key(doc, GROUP_KEY)["parent"] = net["key"]
    by_key(doc, LINK_KEY)["parent"] = inner["key"]
    doc["resources"] += [net, inner]
    assert violations(doc) == []
    # The same two resources as children of a custom resource: not waited for.
    by_key(doc, "azdl:infra:Net::net")["custom"] = True
    [v] = violations(doc)
    assert "PrivateDnsZoneGroup 'ws-dns'" in v.message


def test_zones_outside_the_stack_need_no_link_in_it():
    """Central (bring-your-own) zones by id: their VNet links are the landing zone's."""
    doc = private_workspace_plan([GROUP_KEY])
    doc["resources"] = [r for r in doc["resources"] if r["name"] not in ("zone", "zone-link")]
    group = by_key(doc, GROUP_KEY)
    group["dependsOn"] = [PE_KEY]
    zone_id = "/subscriptions/s/resourceGroups/dns/providers/Microsoft.Network/privateDnsZones/"
    zone_id += "privatelink.api.azureml.ms"
    group["inputs"]["privateDnsZoneConfigs"] = [{"privateDnsZoneId": zone_id}]
    assert violations(doc) == []


def test_microsofts_secure_quickstart_order_passes_and_ours_before_the_fix_fails():
    """The quickstart (Azure/azure-quickstart-templates, machine-learning-end-to-end-secure,
    modules/machinelearning.bicep) makes its computes module depend on `machineLearning` and on
    the `machineLearningPrivateEndpoint` module (machinelearningnetworking.bicep: the endpoint,
    two zones, the zone group and two VNet links). Transcribed: modules as components."""

    def r(type_, name, inputs=None, **kw):
        return resource(AZ + type_, name, inputs or {}, **kw)

    net = resource("bicep:module:machinelearningnetworking", "net", {}, custom=False)
    ws = r("machinelearningservices:Workspace", "machineLearning")
    pe = r("network:PrivateEndpoint", "machineLearningPrivateEndpoint",
           {"privateLinkServiceConnections": [{"groupIds": ["amlworkspace"]}]},
           dependsOn=[ws["key"]], parent=net["key"])  # fmt: skip
    zones = [
        r("privatedns:PrivateZone", z, {"privateZoneName": z}, parent=net["key"])
        for z in ("privatelink.api.azureml.ms", "privatelink.notebooks.azure.net")
    ]
    group = r(
        "network:PrivateDnsZoneGroup",
        "privateEndpointDns",
        dependsOn=[pe["key"], *(z["key"] for z in zones)],
        parent=net["key"],
    )
    links = [r("privatedns:VirtualNetworkLink", f"{z['name']}-link", dependsOn=[z["key"]],
               parent=net["key"]) for z in zones]  # fmt: skip
    cluster = compute("cluster001")
    cluster["dependsOn"] = [ws["key"], net["key"]]
    assert violations(plan(net, ws, pe, *zones, group, *links, cluster)) == []
    cluster["dependsOn"] = [ws["key"]]  # what infra/cluster.py declared before this rule
    [v] = violations(plan(net, ws, pe, *zones, group, *links, cluster))
    assert "PrivateEndpoint 'machineLearningPrivateEndpoint'" in v.message
