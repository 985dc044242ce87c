"""`network.outbound: restricted` against Azure ML's documented outbound list (the pages and their
dates are in tests/infra/documented_outbound.py): every required row is allowed, every allowed
destination is a documented row or one of azdl's own, named with its reason."""

import pytest

from infra.network import OUTBOUND_SERVICE_RULES, security_rules
from tests.infra.documented_outbound import (
    FIREWALL_BASIC,
    FIREWALL_TAG_SPELLING,
    PUBLIC_INTERNET_REQUIRED,
    PUBLIC_INTERNET_SITUATIONAL,
)

# Destinations azdl allows beyond Azure ML's list, and why.
AZDL_OWN = {
    # dev reaches its registry and Key Vault through their public endpoints (service tags);
    # prod through private endpoints, inside the VNet
    ("AzureContainerRegistry.{region}", "Tcp", "443"),
    ("AzureKeyVault.{region}", "Tcp", "443"),
}
NFS = {("Storage.{region}", "Tcp", "2049")}  # files-nfs-protocol: NFS 4.1 uses TCP 2049


def allowed_triples(nfs: bool) -> set[tuple[str, str, str]]:
    """The service-tag allows of the restricted NSG, one (tag, protocol, port) per port."""
    rules = security_rules("{region}", "restricted", nfs=nfs)
    return {
        (r.destination_address_prefix, r.protocol, port)
        for r in rules
        if r.direction == "Outbound"
        and r.access == "Allow"
        and r.destination_address_prefix != "VirtualNetwork"
        for port in r.destination_port_ranges
    }


def covers(rules, tag: str, protocol: str, port: str) -> bool:
    for r in rules:
        if r.direction != "Outbound" or r.access != "Allow" or r.destination_address_prefix != tag:
            continue
        ports = "*" if r.destination_port_range == "*" else r.destination_port_ranges
        if r.protocol in ("*", protocol) and (ports == "*" or port in ports):
            return True
    return False


@pytest.mark.parametrize("nfs", [False, True])
def test_restricted_outbound_is_the_documented_list_and_azdls_own_rows(nfs):
    kept = {row for row, applies in PUBLIC_INTERNET_SITUATIONAL.items() if applies}
    expected = PUBLIC_INTERNET_REQUIRED | kept | AZDL_OWN | (NFS if nfs else set())
    allowed = allowed_triples(nfs)
    assert not PUBLIC_INTERNET_REQUIRED - allowed, "required rows missing"
    assert allowed == expected


def test_the_firewall_pages_basic_list_is_allowed():
    rules = security_rules("{region}", "restricted")
    missing = [
        (tag, protocol, port)
        for tag, protocol, port in sorted(FIREWALL_BASIC)
        if not covers(rules, FIREWALL_TAG_SPELLING.get(tag, tag), protocol, port)
    ]
    assert missing == []


def test_front_door_front_end_is_allowed_before_the_deny():
    """how-to-secure-workspace-vnet's required list: AzureFrontDoor.FrontEnd, TCP 443."""
    rules = security_rules("westeurope", "restricted")
    (front_end,) = [r for r in rules if r.destination_address_prefix == "AzureFrontDoor.FrontEnd"]
    deny = next(r for r in rules if r.name == "DenyAllOutbound")
    assert front_end.access == "Allow" and front_end.priority < deny.priority
    assert (front_end.protocol, front_end.destination_port_ranges) == ("Tcp", ["443"])


def test_every_rule_has_its_own_name_and_priority():
    names = [name for name, *_ in OUTBOUND_SERVICE_RULES]
    assert len(set(names)) == len(names)
    priorities = [r.priority for r in security_rules("westeurope", "restricted", nfs=True)
                  if r.direction == "Outbound"]  # fmt: skip
    assert len(set(priorities)) == len(priorities)
