"""The policies for a stack's whole life: images built in Azure, ACR Tasks admitted to a
network-restricted registry, datastores that need no data-plane role to create, and kept data
outside the resource group that `pulumi destroy` deletes. Each against a passing and a
violating plan, through pulumi-policy's own args."""

import copy

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.proxy import unknown_checking_proxy

from azdl.review.policy import check, load_rules
from tests.review.builders import TAGS, plan, resource, storage

POLICY = {p.name: p for p in load_rules().POLICIES}
AZ = "azure-native:"


def options(protect: bool = False) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def violations(policy: str, res: dict) -> list[str]:
    messages: list[str] = []
    args = ResourceValidationArgs(
        res["type"],
        unknown_checking_proxy(copy.deepcopy(res["inputs"])),
        f"urn:pulumi:dev::azdl::{res['key']}",
        res["name"],
        options(res["protect"]),
        None,
    )
    POLICY[policy].validate(args, lambda message, urn=None: messages.append(message))
    return messages


def stack_violations(policy: str, *resources: dict) -> list[str]:
    messages: list[str] = []
    views = [
        PolicyResource(r["type"], unknown_checking_proxy(copy.deepcopy(r["inputs"])), r["key"],
                       r["name"], options(r["protect"]), None, None, [], {})
        for r in resources
    ]  # fmt: skip
    POLICY[policy].validate(StackValidationArgs(views, {}), lambda m, urn=None: messages.append(m))
    return messages


def registry(**properties) -> dict:
    """The registry as infra/registry.py declares it: azure-native's generic ARM resource."""
    props = {"adminUserEnabled": False, "publicNetworkAccess": "Disabled",
             "networkRuleBypassAllowedForTasks": True} | properties  # fmt: skip
    return resource(AZ + "resources:Resource", "registry", {
        "resourceProviderNamespace": "Microsoft.ContainerRegistry", "resourceType": "registries",
        "resourceName": "acr1", "apiVersion": "2025-11-01", "resourceGroupName": "rg",
        "sku": {"name": "Premium"}, "properties": props, "tags": dict(TAGS)})  # fmt: skip


def task_run(registry_name: str = "acr1") -> dict:
    return resource(AZ + "containerregistry:TaskRun", "tensorflow-build", {
        "registryName": registry_name, "resourceGroupName": "rg", "taskRunName": "azdl-tf",
        "runRequest": {"type": "DockerBuildRequest", "isPushEnabled": True}})  # fmt: skip


def test_the_admin_user_policy_reads_the_generic_registry_too():
    assert violations("registry-admin-user-disabled", registry()) == []
    assert violations("registry-admin-user-disabled", registry(adminUserEnabled=True)) == [
        "container registry 'registry': the admin user is enabled. Fix: set "
        "admin_user_enabled=False; pull with the cluster identity's AcrPull role"
    ]


def test_images_are_built_in_azure_not_on_the_deploying_machine():
    assert violations("images-built-in-azure", task_run()) == []
    local = resource("docker-build:index:Image", "tensorflow", {"push": True})
    [message] = violations("images-built-in-azure", local)
    assert "built on the machine that runs `pulumi up`" in message
    assert "TaskRun" in message  # the fix


def test_acr_tasks_must_be_let_through_a_restricted_registry():
    assert stack_violations("tasks-reach-their-registry", registry(), task_run()) == []
    closed = registry(networkRuleBypassAllowedForTasks=False)
    [message] = stack_violations("tasks-reach-their-registry", closed, task_run())
    assert "networkRuleBypassAllowedForTasks is False" in message
    unset = registry()
    del unset["inputs"]["properties"]["networkRuleBypassAllowedForTasks"]
    [message] = stack_violations("tasks-reach-their-registry", unset, task_run())
    assert "not set (false)" in message
    # a public registry, or a run into another registry, needs no bypass
    open_registry = registry(publicNetworkAccess="Enabled", networkRuleBypassAllowedForTasks=None)
    assert stack_violations("tasks-reach-their-registry", open_registry, task_run()) == []
    assert stack_violations("tasks-reach-their-registry", closed, task_run("other")) == []


def test_datastores_are_created_without_validation():
    store = resource(AZ + "machinelearningservices:Datastore", "data-datastore",
                     {"name": "azdl_training_data", "skipValidation": True})  # fmt: skip
    assert violations("datastores-skip-validation", store) == []
    del store["inputs"]["skipValidation"]
    [message] = violations("datastores-skip-validation", store)
    assert "skipValidation is not set" in message and "data plane" in message


def group(name: str, protect: bool) -> dict:
    return resource(AZ + "resources:ResourceGroup", name, {"resourceGroupName": name},
                    protect=protect)  # fmt: skip


WORKSPACE = resource(AZ + "machinelearningservices:Workspace", "workspace",
                     {"resourceGroupName": "platform-rg", "workspaceName": "ws"})  # fmt: skip


def test_kept_storage_lives_outside_the_group_destroy_deletes():
    outputs = storage("outputs", resourceGroupName="data-rg") | {"protect": True}
    fine = (group("platform-rg", False), group("data-rg", True), WORKSPACE, outputs)
    assert stack_violations("kept-data-outlives-its-group", *fine) == []
    # with the workspace: the platform group's deletion takes it (pulumi-azure-native#2522)
    beside = storage("outputs", resourceGroupName="platform-rg") | {"protect": True}
    messages = stack_violations("kept-data-outlives-its-group", group("platform-rg", False),
                                WORKSPACE, beside)  # fmt: skip
    assert "sits in resource group 'platform-rg' with the workspace" in messages[0]
    assert "protected but its resource group 'platform-rg' is not" in messages[1]
    # protected, in a group that is not
    [message] = stack_violations("kept-data-outlives-its-group", group("platform-rg", False),
                                 group("data-rg", False), WORKSPACE, outputs)  # fmt: skip
    assert "protected but its resource group 'data-rg' is not" in message


def soft_delete_plan(workspace_deps: list[str], outputs_deps: list[str]) -> dict:
    deployment = resource("random:index/randomId:RandomId", "deployment", {"byteLength": 3})
    workspace = resource(AZ + "machinelearningservices:Workspace", "workspace",
                         {"workspaceName": "p-mlw-0a1b2c", "resourceGroupName": "platform-rg",
                          "tags": dict(TAGS)}, dependsOn=workspace_deps)  # fmt: skip
    vault = resource(AZ + "keyvault:Vault", "key-vault",
                     {"vaultName": "p-kv-0a1b2c", "resourceGroupName": "platform-rg",
                      "tags": dict(TAGS)}, dependsOn=[deployment["key"]])  # fmt: skip
    outputs = storage("outputs", resourceGroupName="data-rg") | {
        "protect": True,
        "dependsOn": outputs_deps,
    }
    return plan(deployment, workspace, vault, outputs)


def soft_delete_findings(doc: dict) -> list[str]:
    return [f.message for f in check(doc) if f.policy == "soft-deleted-names-per-deployment"]


def test_soft_deleted_names_change_with_every_deployment():
    deployment = "random:index/randomId:RandomId::deployment"
    assert soft_delete_findings(soft_delete_plan([deployment], [])) == []
    # a fixed workspace name: `up` after `destroy` meets the soft-deleted one
    [message] = soft_delete_findings(soft_delete_plan([], []))
    assert message.startswith("workspace 'workspace': its name does not change")
    # a protected account that depends on the id keeps it through `destroy --exclude-protected`
    [message] = soft_delete_findings(soft_delete_plan([deployment], [deployment]))
    assert message.startswith("'outputs' is protected and depends on the deployment id")
