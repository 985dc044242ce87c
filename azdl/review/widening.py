"""Which changes widen access: properties that open a resource up, stack settings that do,
broader role assignments, and NSG rules that let more traffic in."""

import ipaddress
import json
from typing import Any

from azdl.review import manifest as mf
from infra.azure_facts import ROLE_NAMES

TLS_ORDER = {"TLS1_0": 0, "TLS1_1": 1, "TLS1_2": 2, "TLS1_3": 3}
# How much a built-in role (infra.azure_facts) allows: 4 can hand out access, 3 can change
# resources, 2 writes data or images, 1 reads. A role not ranked here cannot be compared, so any
# change to or from it counts as widening (and it is shown by its id).
ROLE_RANKS = {
    "Owner": 4,
    "User Access Administrator": 4,
    "Role Based Access Control Administrator": 4,
    "Contributor": 3,
    "Storage Blob Data Contributor": 2,
    "AcrPush": 2,
    "Reader": 1,
    "Storage Blob Data Reader": 1,
    "AcrPull": 1,
}
SCOPE_LEVELS = ("resource", "resource group", "subscription", "management group", "tenant root")
# Properties that open a resource up: leaf name -> (Azure's value when the property is not
# set, whether a value is open, why a change to an open value matters).
OPENING = {
    "publicNetworkAccess": (
        "Enabled", lambda v: v != "Disabled", "public network access turned on"
    ),
    "allowBlobPublicAccess": (False, lambda v: v is True, "anonymous blob access allowed"),
    "publicAccess": ("None", lambda v: v not in (None, "None"), "blob container made public"),
    "enableNodePublicIp": (True, lambda v: v is not False, "cluster nodes get public IPs"),
    "remoteLoginPortPublicAccess": (
        "NotSpecified", lambda v: v != "Disabled", "SSH port opened on cluster nodes"
    ),
    "adminUserEnabled": (False, lambda v: v is True, "registry admin user enabled"),
    "defaultAction": ("Allow", lambda v: v != "Deny", "firewall default action no longer Deny"),
    "allowSharedKeyAccess": (True, lambda v: v is True, "shared-key (account key) access allowed"),
    "enableHttpsTrafficOnly": (True, lambda v: v is False, "plain HTTP allowed"),
    "disableLocalAuth": (False, lambda v: v is not True, "local (key) authentication enabled"),
}  # fmt: skip
# Stack settings (without the project prefix) that widen access: why, and whether the change
# from the old to the new value (either may be ABSENT) does.
CONFIG_OPENING = {
    "network.publicNetworkAccess": (
        "public network access turned on", lambda a, b: b is True and a is not True
    ),
    "network.mode": (
        "private endpoints dropped", lambda a, b: a == "privateEndpoints" and b != a
    ),
    "network.allowedIpRanges": (
        "firewall admits more internet addresses",
        lambda a, b: bool(set(_strings(b)) - set(_strings(a))),
    ),
    "cluster.nodePublicIp": (
        "cluster nodes get public IPs", lambda a, b: b is True and a is not True
    ),
}  # fmt: skip
ABSENT = object()  # a property the resource does not set
NEW = object()  # the "old" value of every property of a resource being created
_RULE_FIELDS = {
    "source": ("sourceAddressPrefix", "sourceAddressPrefixes"),
    "source ports": ("sourcePortRange", "sourcePortRanges"),
    "destination": ("destinationAddressPrefix", "destinationAddressPrefixes"),
    "destination ports": ("destinationPortRange", "destinationPortRanges"),
    "protocol": ("protocol", None),
}
_OPEN_SOURCES = {"*", "internet", "any", "0.0.0.0/0"}


def security_widening(resource_type: str, path: str, old: Any, new: Any) -> str | None:
    """Why changing `path` from `old` to `new` widens access, or None. `ABSENT` stands for a
    property left unset (Azure's default applies); an `old` of `NEW` means the resource is
    being created, and then any open value is reported."""
    leaf = path.rsplit(".", 1)[-1]
    if leaf == "minimumTlsVersion":
        floor = "TLS1_2" if old is NEW else "TLS1_0" if old is ABSENT else old
        current = "TLS1_0" if new is ABSENT else new
        if TLS_ORDER.get(current, -1) < TLS_ORDER.get(floor, -1):
            return "minimum TLS version lowered" if old is not NEW else _created_with(leaf, new)
        return None
    if ".ipRules" in f".{path}":
        if new not in (ABSENT, None, []) and new != old:
            return "firewall admits more internet addresses"
        return None
    if leaf not in OPENING:
        return None
    default, is_open, reason = OPENING[leaf]
    now = default if new is ABSENT else new
    if mf.is_unknown(now) or not is_open(now):
        return None
    if old is NEW:
        return _created_with(leaf, new)
    before = default if old is ABSENT else old
    return None if is_open(before) else reason


def _created_with(leaf: str, value: Any) -> str:
    return f"created with {leaf} = {json.dumps(value)}"


def ranked_role(role_id: Any) -> tuple[str, int | None]:
    """(readable name, rank) of a role definition id."""
    guid = str(role_id).rstrip("/").rsplit("/", 1)[-1].lower()
    name = ROLE_NAMES.get(guid, guid)
    return (name, ROLE_RANKS[name]) if name in ROLE_RANKS else (guid, None)


def scope_level(scope: Any) -> int | None:
    """Index into SCOPE_LEVELS of an ARM scope; None when it is not known yet or not ARM."""
    if not isinstance(scope, str):
        return None
    parts = scope.strip("/").lower().split("/")
    if parts == [""]:
        return 4
    if len(parts) == 4 and parts[:3] == ["providers", "microsoft.management", "managementgroups"]:
        return 3
    if parts[0] != "subscriptions" or len(parts) < 2:
        return None
    if len(parts) == 2:
        return 2
    if parts[2] == "resourcegroups" and len(parts) == 4:
        return 1
    return 0


def role_widening(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Why a changed role assignment grants more than before: a higher-ranked role, a broader
    scope, or a move to other permissions or another scope at the same level. Narrowing is a
    routine change."""
    reasons = []
    before, after = old.get("roleDefinitionId"), new.get("roleDefinitionId")
    if before != after:
        (was, was_rank), (now, now_rank) = ranked_role(before), ranked_role(after)
        if was_rank is None or now_rank is None:
            reasons.append(f"role changed from {was} to {now} (not a ranked role)")
        elif now_rank > was_rank:
            reasons.append(f"role broadened from {was} to {now}")
        elif now_rank == was_rank:
            reasons.append(f"role changed from {was} to {now} (other permissions)")
    before, after = old.get("scope"), new.get("scope")
    if before != after:
        was, now = scope_level(before), scope_level(after)
        if was is None or now is None:
            reasons.append("role assignment scope changed (not known until deploy)")
        elif now > was:
            reasons.append(f"scope broadened from {SCOPE_LEVELS[was]} to {SCOPE_LEVELS[now]}")
        elif now == was and not after.lower().startswith(before.lower().rstrip("/") + "/"):
            reasons.append(f"role assignment moved to another {SCOPE_LEVELS[now]}")
    return reasons


def _values(rule: dict[str, Any], one: str, many: str | None) -> frozenset | None:
    """The values of a rule field (singular and plural properties); None when unknown."""
    plural = rule.get(many) if many else None
    if mf.is_unknown(plural):
        return None
    raw = [rule.get(one), *(plural or [])]
    if any(mf.is_unknown(v) for v in raw):
        return None
    return frozenset(str(v).lower() for v in raw if v not in (None, ""))


def _within(item: str, wide: str, ports: bool) -> bool:
    if wide in ("*", item):
        return True
    if ports:
        low, _, high = item.partition("-")
        wlow, _, whigh = wide.partition("-")
        try:
            return int(wlow) <= int(low) and int(high or low) <= int(whigh or wlow)
        except ValueError:
            return False
    try:
        return ipaddress.ip_network(item, strict=False).subnet_of(
            ipaddress.ip_network(wide, strict=False)
        )
    except (ValueError, TypeError):
        return False


def _covers_all(wide: frozenset | None, narrow: frozenset | None, ports: bool) -> bool:
    if wide is None or narrow is None:
        return wide == narrow
    if not narrow:
        return not wide
    return all(any(_within(n, w, ports) for w in wide) for n in narrow)


def _inbound(rule: dict[str, Any], access: str) -> bool:
    return rule.get("direction") == "Inbound" and rule.get("access") == access


def _listed(values: frozenset | None) -> str:
    return "(not known until deploy)" if values is None else ",".join(sorted(values)) or "(none)"


def _grown(old: dict[str, Any], new: dict[str, Any], wider: dict[str, Any]) -> list[str]:
    """The fields (`label old => new`) in which NSG rule `wider` (`old` or `new`) matches
    traffic that the other one does not."""
    narrower = old if wider is new else new
    grown = []
    for label, (one, many) in _RULE_FIELDS.items():
        ports = "ports" in label
        if not _covers_all(_values(narrower, one, many), _values(wider, one, many), ports):
            was, now = _listed(_values(old, one, many)), _listed(_values(new, one, many))
            grown.append(f"{label} {was} => {now}")
    return grown


def _from_internet(rule: dict[str, Any]) -> bool:
    sources = _values(rule, *_RULE_FIELDS["source"]) or frozenset()
    for source in sources:
        if source in _OPEN_SOURCES:
            return True
        try:
            if not ipaddress.ip_network(source, strict=False).is_private:
                return True
        except ValueError:
            continue
    return False


def rule_widening(name: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str]:
    """Why NSG rule `name` going from `old` to `new` (None: absent) lets more traffic in: a new
    or widened inbound allow rule (sources, ports, destinations, protocol, precedence), or an
    inbound deny rule removed, turned off or narrowed."""
    reasons = []
    if new is not None and _inbound(new, "Allow"):
        if old is None or not _inbound(old, "Allow"):
            where = " from the internet" if _from_internet(new) else ""
            reasons.append(f"new inbound allow rule {name}{where}")
        else:
            grown = _grown(old, new, wider=new)
            if _precedes(new, old):
                grown.append(f"priority {old.get('priority')} => {new.get('priority')}")
            if grown:
                reasons.append(f"inbound allow rule {name} widened: {'; '.join(grown)}")
    if old is not None and _inbound(old, "Deny"):
        if new is None:
            reasons.append(f"inbound deny rule {name} removed")
        elif not _inbound(new, "Deny"):
            reasons.append(f"inbound deny rule {name} no longer denies inbound traffic")
        else:
            shrunk = _grown(old, new, wider=old)
            if _precedes(old, new):
                shrunk.append(f"priority {old.get('priority')} => {new.get('priority')}")
            if shrunk:
                reasons.append(f"inbound deny rule {name} weakened: {'; '.join(shrunk)}")
    return reasons


def _precedes(rule: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether `rule` is evaluated before `other` would have been (a lower priority number)."""
    a, b = rule.get("priority"), other.get("priority")
    return isinstance(a, int | float) and isinstance(b, int | float) and a < b


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []
