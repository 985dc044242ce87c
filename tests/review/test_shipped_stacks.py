"""The real program for both shipped stacks: faithful, deterministic, within every policy."""

from pathlib import Path

import pytest

from azdl.review import manifest
from azdl.review.cost import estimate, training_cluster
from azdl.review.diff import diff
from azdl.review.plan import render_stack
from azdl.review.policy import check
from azdl.review.replacement import forces_replacement
from azdl.review.tree import render_tree

pytestmark = pytest.mark.slow  # each stack renders in a fresh interpreter (seconds)
STACKS = ("dev", "prod")


@pytest.mark.parametrize("stack", STACKS)
def test_shipped_stacks_pass_every_mandatory_policy(shipped_plans, stack):
    findings = check(shipped_plans[stack])
    assert [f for f in findings if f.mandatory] == []


def test_the_same_program_renders_byte_identical_json():
    # Back to back, so that other edits of the working tree (image content hashes cover
    # training/) cannot fall between the two renders.
    first, second = render_stack("prod")[0], render_stack("prod")[0]
    assert manifest.dumps(first) == manifest.dumps(second)


@pytest.mark.parametrize("stack", STACKS)
def test_manifest_is_faithful(shipped_plans, stack):
    doc = shipped_plans[stack]
    keys = {r["key"] for r in doc["resources"]}
    assert len(keys) == len(doc["resources"])
    for res in doc["resources"]:
        assert res["parent"] is None or res["parent"] in keys
        assert set(res["dependsOn"]) <= keys, res["key"]
    by_name = {(r["type"], r["name"]): r for r in doc["resources"]}
    compute = by_name[("azure-native:machinelearningservices:Compute", "compute")]
    assert compute["parent"] == "azdl:infra:Cluster::cluster"
    node = compute["inputs"]["properties"]["properties"]
    assert node["scaleSettings"]["maxNodeCount"] == doc["outputs"]["clusterMaxNodes"]
    identity = "azdl:infra:Cluster$azure-native:managedidentity:UserAssignedIdentity::identity"
    role = by_name[("azure-native:authorization:RoleAssignment", "data-read")]
    assert role["inputs"]["principalId"] == {"$unknown": [identity]}  # Azure assigns it
    assert identity in role["dependsOn"]
    data = by_name[("azure-native:storage:StorageAccount", "data")]
    mode = doc["config"]["azdl:storage"]["dataProtection"]
    expected = {"protect": (True, False), "retain": (False, True), "none": (False, False)}
    assert (data["protect"], data["retainOnDelete"]) == expected[mode]


@pytest.mark.parametrize("stack", STACKS)
def test_a_name_is_known_in_the_plan_only_where_the_providers_preview_gives_it(
    shipped_plans, stack
):
    """The plan is a preview of a new stack: an output is the input of the same name, the rest
    unknown (pulumi-azure-native provider/pkg/convert/previewOutputs.go, commit 604cfd5). A
    compute's `name` is no input (its input is `computeName`), a datastore's is."""
    doc = shipped_plans[stack]
    by_name = {(r["type"], r["name"]): r for r in doc["resources"]}
    compute = by_name[("azure-native:machinelearningservices:Compute", "compute")]
    assert doc["outputs"]["clusterName"] == manifest.unknown([compute["key"]])
    assert training_cluster(doc) is compute
    group = by_name[("azure-native:resources:ResourceGroup", "data-resource-group")]
    data = by_name[("azure-native:storage:StorageAccount", "data")]
    assert data["inputs"]["resourceGroupName"] == manifest.unknown([group["key"]])
    datastore = by_name[("azure-native:machinelearningservices:Datastore", "data-datastore")]
    assert doc["outputs"]["dataDatastore"] == datastore["inputs"]["name"] == "azdl_training_data"


DISPLAY_NAMES = {"friendlyName"}  # free text shown in the portal, changed in place


@pytest.mark.parametrize("stack", STACKS)
def test_every_azure_name_input_forces_replacement(shipped_plans, stack):
    names = {
        (res["type"], key)
        for res in shipped_plans[stack]["resources"]
        if res["type"].startswith("azure-native:")
        for key in res["inputs"]
        if (key.endswith("Name") or key in ("name", "version")) and key not in DISPLAY_NAMES
    }
    assert names
    assert [n for n in sorted(names) if not forces_replacement(*n)] == []


@pytest.mark.parametrize("stack", STACKS)
def test_tree_shows_every_resource_under_its_component(shipped_plans, stack):
    doc = shipped_plans[stack]
    tree = render_tree(doc)
    assert "pulumi:pulumi:Stack" in tree and f"azdl-{stack}" in tree
    assert tree.count("\n+ ") == len(doc["resources"]) + 1
    assert "│  ├─ azure-native:machinelearningservices:Compute" in tree


@pytest.mark.parametrize("stack", STACKS)
def test_plan_gives_the_count_pulumi_up_reports(shipped_plans, stack):
    """`pulumi up` ends with `Resources: + N created`, N counting every row of its preview: the
    stack, the components and the resources (default providers are not reported: pulumi/pulumi
    pkg/engine/deployment.go, `isDefaultProviderStep`, read 2026-11-24). The README's step 4
    tells users to expect the number the plan's first line gives."""
    doc = shipped_plans[stack]
    tree = render_tree(doc)
    rows = tree.count("\n+ ")
    custom = sum(r["custom"] for r in doc["resources"])
    assert f"{custom} resources to create" in tree.splitlines()[0]
    assert f"`pulumi up` reports `+ {rows} created`" in tree.splitlines()[0]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "`Resources: + N created` (N as\n   `azdl plan mine` gives it for `pulumi up`" in readme


@pytest.mark.parametrize("stack", STACKS)
def test_shipped_stacks_are_fully_priced_within_budget(shipped_plans, stack):
    doc = shipped_plans[stack]
    est = estimate(doc)
    assert est.unpriced == []
    budget = doc["config"]["azdl:maxGpuSpendPerHourUsd"]
    cluster = f"cluster {training_cluster(doc)['inputs']['computeName']}"
    gpu = sum(line.max_per_hour for line in est.lines if line.item == cluster)
    assert 0 < gpu <= budget


def test_plan_command_prints_tree_cost_and_epoch(cli_plan_output):
    _doc, _text, printed = cli_plan_output
    assert "Plan of stack dev (offline, no cloud access)" in printed
    assert "Estimated cost of stack dev (USD, estimate)" in printed
    assert "one epoch (1,281,167 images at 2,000.0 images/s)" in printed
    assert "note: estimate: westeurope list prices as of" in printed


def test_dev_to_prod_tightens_and_prod_to_dev_widens(shipped_plans):
    forward = diff(shipped_plans["dev"], shipped_plans["prod"])
    # The one grant prod adds: its image-build compute's own identity may push to the registry
    # (dev builds no images in Azure ML).
    assert [(res.name, reason) for res, reason in forward.security] == [
        ("image-build-push", "new role assignment: AcrPush")
    ]
    assert forward.exit_code == 3  # replacements (names, VM size)
    backward = diff(shipped_plans["prod"], shipped_plans["dev"])
    reasons = {reason for _res, reason in backward.security}
    assert "public network access turned on" in reasons
    assert "cluster nodes get public IPs" in reasons
