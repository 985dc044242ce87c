"""The container registry and the images built into it: no admin user, images built by ACR
Tasks in Azure (and let through the registry's network rules), zone redundancy in prod."""

from collections.abc import Iterator

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    Severity,
    StackValidationArgs,
)

from azdl.review import arm
from infra.azure_facts import TASK_RUN, UNKNOWN, lookup

from .pack import is_prod, resource_policy, stack_policy

# Image resources that build on the machine running `pulumi up` (pulumi-docker-build,
# pulumi-docker).
LOCAL_IMAGE_BUILDS = ("docker-build:index:Image", "docker:index:Image")


@resource_policy(
    name="registry-admin-user-disabled",
    description="Container registries keep the admin user (a shared password) off.",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation="set admin_user_enabled=False; pull with the cluster identity's AcrPull role",
    applies_to=arm.is_registry,
)
def _registry_admin(args: ResourceValidationArgs) -> Iterator[str]:
    if lookup(arm.arm_properties(args.resource_type, args.props), "adminUserEnabled") is True:
        yield f"container registry '{args.name}': the admin user is enabled"


@resource_policy(
    name="images-built-in-azure",
    description="Images are built by ACR Tasks in Azure, not on the machine that runs `pulumi up`.",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation="build with a containerregistry TaskRun from an uploaded context (infra/images.py)",
    applies_to=LOCAL_IMAGE_BUILDS,
)
def _local_image_build(args: ResourceValidationArgs) -> Iterator[str]:
    yield (
        f"image '{args.name}' ({args.resource_type}) is built on the machine that runs "
        "`pulumi up`, which then needs a Docker engine and a network path to the registry "
        "(a private registry has none from outside its VNet)"
    )


@resource_policy(
    name="registry-zone-redundant-in-prod",
    description="A prod Premium registry states zone redundancy Enabled.",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    remediation="set zone_redundancy='Enabled' on the registry (infra/registry.py does in prod)",
    applies_to=arm.is_registry,
)
def _prod_registry_zone_redundancy(args: ResourceValidationArgs) -> Iterator[str]:
    """A prod Premium registry states zoneRedundancy Enabled (container-registry/zone-redundancy:
    a Premium option; the SDK's default is Disabled)."""
    if not is_prod(args.props):
        return
    if lookup(args.props, "sku", "name") != "Premium":
        return
    zones = lookup(arm.arm_properties(args.resource_type, args.props), "zoneRedundancy")
    if zones not in ("Enabled", UNKNOWN):
        yield (
            f"container registry '{args.name}' (prod): zoneRedundancy is "
            f"{zones or 'not set (Disabled)'}"
        )


@stack_policy(
    name="tasks-reach-their-registry",
    description=(
        "A registry that ACR Tasks build into and that restricts network access lets tasks "
        "bypass its network rules (networkRuleBypassAllowedForTasks)."
    ),
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation=(
        "set properties.networkRuleBypassAllowedForTasks: true on the registry (API "
        "2025-05-01-preview or later; infra/registry.py)"
    ),
)
def _tasks_reach_their_registry(args: StackValidationArgs, report_violation: ReportViolation):
    """An ACR Tasks run pushes from Microsoft-hosted agents outside the VNet: a registry with
    network rules admits them only with networkRuleBypassAllowedForTasks (since 1 June 2025,
    https://learn.microsoft.com/azure/container-registry/manage-network-bypass-policy-for-tasks,
    ms.date 2025-05-15)."""
    registries = {}
    for res in args.resources:
        if arm.is_registry(res.resource_type, res.props):
            name = arm.arm_name(res.resource_type, res.props, "registryName")
            registries[name] = (res, arm.arm_properties(res.resource_type, res.props))
    for run in (r for r in args.resources if r.resource_type == TASK_RUN):
        found = registries.get(lookup(run.props, "registryName"))
        if found is None:
            continue
        registry, props = found
        restricted = lookup(props, "publicNetworkAccess") == "Disabled" or (
            lookup(props, "networkRuleSet", "defaultAction") == "Deny"
        )
        bypass = lookup(props, "networkRuleBypassAllowedForTasks")
        if restricted and bypass is not True and bypass is not UNKNOWN:
            report_violation(
                f"task run '{run.name}' builds into registry '{registry.name}', whose network "
                "rules refuse ACR Tasks' agents: networkRuleBypassAllowedForTasks is "
                f"{'not set (false)' if bypass is None else bypass}",
                run.urn,
            )
