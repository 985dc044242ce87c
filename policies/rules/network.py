"""Network security groups: inbound only from Azure ML's control plane and the VNet; in prod,
Azure ML's documented outbound list, then deny all."""

import ipaddress
from collections.abc import Iterator
from typing import Any

from pulumi_policy import EnforcementLevel, ResourceValidationArgs, Severity

from infra.azure_facts import NETWORK_SECURITY_GROUP, SECURITY_RULE, UNKNOWN, lookup

from .pack import is_prod, resource_policy

# Sources that may reach the training subnet inbound: Azure ML's control plane and in-VNet
# traffic. Service tags may carry a region suffix (AzureMachineLearning.westeurope).
INBOUND_SERVICE_TAGS = ("BatchNodeManagement", "AzureMachineLearning")
INBOUND_INTERNAL = ("VirtualNetwork", "AzureLoadBalancer")
# Outbound destinations Azure ML requires of compute in a customer VNet (service tags, without
# their region suffix), the "Required" table of its public internet access list, which
# how-to-secure-workspace-vnet and how-to-secure-training-vnet include (MicrosoftDocs/
# azure-ai-docs, includes/machine-learning-public-internet-access.md, ms.date 2025-02-10;
# tests/infra/documented_outbound.py transcribes it with the ports).
REQUIRED_OUTBOUND_TAGS = (
    "AzureActiveDirectory", "AzureMachineLearning", "BatchNodeManagement", "AzureResourceManager",
    "Storage", "AzureFrontDoor.FrontEnd", "MicrosoftContainerRegistry", "AzureFrontDoor.FirstParty",
)  # fmt: skip


def _is_allowed_source(source: str) -> bool:
    if source.split(".")[0] in INBOUND_SERVICE_TAGS or source in INBOUND_INTERNAL:
        return True
    try:
        return ipaddress.ip_network(source, strict=False).is_private
    except ValueError:
        return False  # "*", "Internet", "Any" and every other tag


def _rule_violations(label: str, rule: Any) -> Iterator[str]:
    if lookup(rule, "direction") != "Inbound" or lookup(rule, "access") != "Allow":
        return
    prefixes = lookup(rule, "sourceAddressPrefixes", default=[])
    sources = [lookup(rule, "sourceAddressPrefix"), *([] if prefixes is UNKNOWN else prefixes)]
    for source in sources:
        if isinstance(source, str) and not _is_allowed_source(source):
            yield (
                f"{label} allows inbound traffic from '{source}'; only "
                f"{', '.join(INBOUND_SERVICE_TAGS)} may reach the subnet"
            )


@resource_policy(
    name="nsg-inbound-azureml-only",
    description="Inbound NSG rules admit only Azure ML's service tags (and in-VNet traffic).",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    remediation=(
        "remove the rule; Azure ML needs inbound only from BatchNodeManagement and "
        "AzureMachineLearning"
    ),
    applies_to=(NETWORK_SECURITY_GROUP, SECURITY_RULE),
)
def _nsg_inbound(args: ResourceValidationArgs) -> Iterator[str]:
    if args.resource_type == NETWORK_SECURITY_GROUP:
        rules = lookup(args.props, "securityRules", default=[])
        if rules is UNKNOWN:
            return
        for i in range(len(rules)):
            rule = lookup(rules, i)
            yield from _rule_violations(f"NSG '{args.name}' rule '{lookup(rule, 'name')}'", rule)
    else:
        yield from _rule_violations(f"NSG rule '{args.name}'", args.props)


def _is_deny_all_outbound(rule: Any) -> bool:
    return (
        lookup(rule, "direction") == "Outbound"
        and lookup(rule, "access") == "Deny"
        and lookup(rule, "destinationAddressPrefix") in ("*", "Internet")
        and lookup(rule, "protocol") == "*"
        and lookup(rule, "destinationPortRange") == "*"
    )


@resource_policy(
    name="nsg-outbound-restricted-in-prod",
    description="Prod compute subnets allow Azure ML's documented outbound list, then deny all.",
    enforcement=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation=(
        "set network.outbound: restricted in the prod stack (infra/network.py adds Azure ML's "
        "outbound rules and a deny-all at priority 4096)"
    ),
    applies_to=(NETWORK_SECURITY_GROUP,),
)
def _prod_nsg_outbound(args: ResourceValidationArgs) -> Iterator[str]:
    """A prod compute subnet's NSG (one admitting Azure ML's control plane) ends its outbound
    rules with a deny-all: without one, Azure's default AllowInternetOutBound lets every
    destination through (learn.microsoft.com/azure/virtual-network/
    network-security-groups-overview#default-security-rules)."""
    if not is_prod(args.props):
        return
    rules = lookup(args.props, "securityRules", default=[])
    if rules is UNKNOWN:
        return
    rules = [lookup(rules, i) for i in range(len(rules))]
    compute_subnet = any(
        lookup(r, "direction") == "Inbound"
        and str(lookup(r, "sourceAddressPrefix") or "").split(".")[0] in INBOUND_SERVICE_TAGS
        for r in rules
    )
    if not compute_subnet:
        return
    denies = [r for r in rules if _is_deny_all_outbound(r)]
    if not denies:
        yield (
            f"NSG '{args.name}' (prod) has no deny-all outbound rule, so Azure's default rules "
            "allow all outbound traffic"
        )
        return
    deny_priority = min(lookup(r, "priority") for r in denies)
    later = [
        lookup(r, "name")
        for r in rules
        if lookup(r, "direction") == "Outbound"
        and lookup(r, "access") == "Allow"
        and isinstance(lookup(r, "priority"), (int, float))
        and lookup(r, "priority") > deny_priority
    ]
    if later:
        yield (
            f"NSG '{args.name}' (prod): outbound rules {', '.join(map(str, later))} come after "
            f"the deny-all (priority {deny_priority}) and never apply"
        )
    allowed = {
        _service_tag(lookup(r, "destinationAddressPrefix"))
        for r in rules
        if lookup(r, "direction") == "Outbound"
        and lookup(r, "access") == "Allow"
        and isinstance(lookup(r, "priority"), (int, float))
        and lookup(r, "priority") < deny_priority
    }
    missing = [tag for tag in REQUIRED_OUTBOUND_TAGS if tag not in allowed]
    if missing:
        yield (
            f"NSG '{args.name}' (prod) denies outbound traffic Azure ML requires of its compute: "
            f"no allow rule before the deny-all for {', '.join(missing)}"
        )


def _service_tag(prefix: Any) -> str | None:
    """`Storage.westeurope` -> `Storage`; `AzureFrontDoor.FrontEnd` stays (not a region)."""
    if not isinstance(prefix, str):
        return None
    tag = prefix.partition(".")[0]
    return prefix if tag == "AzureFrontDoor" else tag
