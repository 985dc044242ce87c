"""Compare two plan manifests: what is added, removed and changed, per property.

Changes that force a replacement come from `replacements.yaml` (data, not code). Changes that
widen access are flagged as security-widening. `Diff.exit_code` tells CI whether a reviewer
must look: see `EXIT_CODES`.
"""

import inspect
import ipaddress
import json
from dataclasses import dataclass, field
from functools import cache
from importlib import import_module
from pathlib import Path
from typing import Any

import yaml

from azdl.review import manifest as mf

REPLACEMENTS_FILE = Path(__file__).with_name("replacements.yaml")
EXIT_CODES = {
    0: "no changes",
    1: "changes, all routine (in-place updates, additions that widen nothing, other settings)",
    2: "error (bad input)",
    3: "needs a reviewer's attention: a replacement, a removal, removed deletion protection, "
    "a security-widening change or a raised GPU budget",
}
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
SECURITY_RULE = "azure-native:network:SecurityRule"
TLS_ORDER = {"TLS1_0": 0, "TLS1_1": 1, "TLS1_2": 2, "TLS1_3": 3}
# Built-in roles (fixed GUIDs in every tenant) and how much they allow: 4 can hand out access,
# 3 can change resources, 2 writes data or images, 1 reads. A role not listed cannot be ranked,
# so any change to or from it counts as widening.
ROLES = {
    "8e3af657-a8ff-404c-9d86-bca7d93b5e97": ("Owner", 4),
    "18d7d88d-d35e-4fb5-a5c3-7773c6a72089": ("User Access Administrator", 4),
    "f58310d9-a9f6-439a-9e8d-f62e7b41a168": ("Role Based Access Control Administrator", 4),
    "b24988ac-6180-42a0-ab88-20f7382dd24c": ("Contributor", 3),
    "ba92f5b4-2d11-453d-a403-e96b0029c9fe": ("Storage Blob Data Contributor", 2),
    "8311e382-0749-4cb8-b61a-304f252e45ec": ("AcrPush", 2),
    "acdd72a7-3385-48ef-bd42-f606fba81ae7": ("Reader", 1),
    "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1": ("Storage Blob Data Reader", 1),
    "7f951dda-4ed3-4680-a7ca-43fe172d538d": ("AcrPull", 1),
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
# from the old to the new value (either may be _ABSENT) does.
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
BUDGET_KEY = "maxGpuSpendPerHourUsd"
# Query options of the SDK's lookups that are resource inputs but no part of the ARM id.
_QUERY_OPTIONS = {"expand", "opts"}
_ABSENT = object()  # a property the resource does not set
_NEW = object()  # the "old" value of every property of a resource being created
_RULE_FIELDS = {
    "source": ("sourceAddressPrefix", "sourceAddressPrefixes"),
    "source ports": ("sourcePortRange", "sourcePortRanges"),
    "destination": ("destinationAddressPrefix", "destinationAddressPrefixes"),
    "destination ports": ("destinationPortRange", "destinationPortRanges"),
    "protocol": ("protocol", None),
}
_OPEN_SOURCES = {"*", "internet", "any", "0.0.0.0/0"}


@cache
def replacement_paths() -> dict[str, tuple[str, ...]]:
    raw = yaml.safe_load(REPLACEMENTS_FILE.read_text())
    return {k: tuple(v) for k, v in raw.items()}


def _camel(snake: str) -> str:
    first, *rest = snake.split("_")
    return first + "".join(w.title() for w in rest)


@cache
def arm_id_inputs(resource_type: str) -> tuple[str, ...]:
    """The inputs that make up an azure-native resource's ARM id (its Azure name, its parents'
    names, resource group, scope): changing one means another resource, so a replacement.
    They are the parameters of the SDK's own lookup (`get_<resource>`: the GET on the id)
    that are also inputs of the resource; () for anything else."""
    package, _, rest = resource_type.partition(":")
    module, _, name = rest.partition(":")
    if package != "azure-native" or not module or not name:
        return ()
    try:
        cls = getattr(import_module(f"pulumi_azure_native.{module}"), name)
        leaf = cls.__module__.rsplit(".", 1)[-1]
        getter = getattr(
            import_module(f"{cls.__module__.rsplit('.', 1)[0]}.get_{leaf}"), f"get_{leaf}"
        )
    except (ImportError, AttributeError):
        return ()
    inputs = set(inspect.signature(cls._internal_init).parameters)
    return tuple(
        _camel(p)
        for p in inspect.signature(getter).parameters
        if p in inputs and p not in _QUERY_OPTIONS
    )


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Dotted paths to leaves; lists of named objects (NSG rules) are keyed by name."""
    if isinstance(value, dict) and value and not mf.is_unknown(value) and "$ref" not in value:
        out: dict[str, Any] = {}
        for k in sorted(value):
            out.update(flatten(value[k], f"{path}.{k}" if path else k))
        return out
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, dict) and isinstance(v.get("name"), str) for v in value)
    ):
        out = {}
        for v in value:
            out.update(flatten({k: x for k, x in v.items() if k != "name"}, f"{path}[{v['name']}]"))
        return out
    return {path: value}


def _covers(listed: str, path: str) -> bool:
    return listed == "*" or path == listed or path.startswith((f"{listed}.", f"{listed}["))


def forces_replacement(resource_type: str, path: str, declared: tuple[str, ...] = ()) -> bool:
    """Whether changing `path` replaces the resource: an input of its ARM id
    (`arm_id_inputs`), a property listed in replacements.yaml, or one of the resource's own
    `replaceOnChanges` option (`declared`)."""
    table = replacement_paths()
    listed = table.get("*", ()) + table.get(resource_type, ()) + arm_id_inputs(resource_type)
    return any(_covers(entry, path) for entry in listed + tuple(declared))


def security_widening(resource_type: str, path: str, old: Any, new: Any) -> str | None:
    """Why changing `path` from `old` to `new` widens access, or None. `_ABSENT` stands for a
    property left unset (Azure's default applies); an `old` of `_NEW` means the resource is
    being created, and then any open value is reported."""
    leaf = path.rsplit(".", 1)[-1]
    if leaf == "minimumTlsVersion":
        floor = "TLS1_2" if old is _NEW else "TLS1_0" if old is _ABSENT else old
        current = "TLS1_0" if new is _ABSENT else new
        if TLS_ORDER.get(current, -1) < TLS_ORDER.get(floor, -1):
            return "minimum TLS version lowered" if old is not _NEW else _created_with(leaf, new)
        return None
    if ".ipRules" in f".{path}":
        if new not in (_ABSENT, None, []) and new != old:
            return "firewall admits more internet addresses"
        return None
    if leaf not in OPENING:
        return None
    default, is_open, reason = OPENING[leaf]
    now = default if new is _ABSENT else new
    if mf.is_unknown(now) or not is_open(now):
        return None
    if old is _NEW:
        return _created_with(leaf, new)
    before = default if old is _ABSENT else old
    return None if is_open(before) else reason


def _created_with(leaf: str, value: Any) -> str:
    return f"created with {leaf} = {json.dumps(value)}"


def _role(role_id: Any) -> tuple[str, int | None]:
    """(readable name, rank) of a role definition id."""
    guid = str(role_id).rstrip("/").rsplit("/", 1)[-1].lower()
    return ROLES.get(guid, (guid, None))


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
        (was, was_rank), (now, now_rank) = _role(before), _role(after)
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


def _rules(inputs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    rules = inputs.get("securityRules")
    if not isinstance(rules, list):
        return {}
    return {str(r.get("name")): r for r in rules if isinstance(r, dict)}


def _rule_name(res: dict[str, Any]) -> str:
    return str(res["inputs"].get("securityRuleName") or res["name"])


@dataclass
class Change:
    path: str
    old: Any
    new: Any
    replace: bool
    security: str | None
    ignored: bool = False  # listed in the resource's ignoreChanges: Pulumi will not apply it


@dataclass
class ResourceDiff:
    key: str
    type: str
    name: str
    action: str  # create | delete | update | replace
    changes: list[Change] = field(default_factory=list)
    security: list[str] = field(default_factory=list)
    attention: list[str] = field(default_factory=list)


@dataclass
class Diff:
    base: str
    head: str
    resources: list[ResourceDiff]
    config: list[Change] = field(default_factory=list)  # the stack settings behind the changes
    config_attention: list[str] = field(default_factory=list)

    @property
    def security(self) -> list[tuple[ResourceDiff, str]]:
        return [(r, s) for r in self.resources for s in r.security]

    @property
    def config_security(self) -> list[Change]:
        return [c for c in self.config if c.security]

    @property
    def exit_code(self) -> int:
        if (
            self.config_security
            or self.config_attention
            or any(r.security or r.attention or r.action in ("delete", "replace")
                   for r in self.resources)
        ):  # fmt: skip
            return 3
        return 1 if self.resources or self.config else 0

    def to_json(self) -> dict[str, Any]:
        def value(v: Any) -> Any:
            return "<absent>" if v is _ABSENT else v

        def change(c: Change) -> dict[str, Any]:
            return {"path": c.path, "old": value(c.old), "new": value(c.new),
                    "replace": c.replace, "security": c.security,
                    "ignored": c.ignored}  # fmt: skip

        def resource(r: ResourceDiff) -> dict[str, Any]:
            return {"key": r.key, "type": r.type, "name": r.name, "action": r.action,
                    "security": r.security, "attention": r.attention,
                    "changes": [change(c) for c in r.changes]}  # fmt: skip

        return {
            "base": self.base,
            "head": self.head,
            "exitCode": self.exit_code,
            "config": [change(c) for c in self.config],
            "configAttention": self.config_attention,
            "resources": [resource(r) for r in self.resources],
        }


def _add(reasons: list[str], new: list[str]) -> None:
    reasons.extend(r for r in new if r not in reasons)


def _created(res: dict[str, Any]) -> ResourceDiff:
    out = ResourceDiff(res["key"], res["type"], res["name"], "create")
    inputs = res["inputs"]
    if res["type"] == ROLE_ASSIGNMENT:
        role, _rank = _role(inputs.get("roleDefinitionId"))
        level = scope_level(inputs.get("scope"))
        on = "" if level is None else f" on a {SCOPE_LEVELS[level]}"
        out.security.append(f"new role assignment: {role}{on}")
    if res["type"] == SECURITY_RULE:
        _add(out.security, rule_widening(_rule_name(res), None, inputs))
    for name, rule in _rules(inputs).items():
        _add(out.security, rule_widening(name, None, rule))
    for path, new in flatten(inputs).items():
        reason = security_widening(res["type"], path, _NEW, new)
        _add(out.security, [reason] if reason else [])
    return out


def _deleted(res: dict[str, Any]) -> ResourceDiff:
    out = ResourceDiff(res["key"], res["type"], res["name"], "delete")
    out.attention.append("removed: Azure deletes it")
    if res["type"] == SECURITY_RULE:
        _add(out.security, rule_widening(_rule_name(res), res["inputs"], None))
    for name, rule in _rules(res["inputs"]).items():
        _add(out.security, rule_widening(name, rule, None))
    return out


def _changed(old: dict[str, Any], new: dict[str, Any]) -> ResourceDiff | None:
    out = ResourceDiff(new["key"], new["type"], new["name"], "update")
    before, after = flatten(old["inputs"]), flatten(new["inputs"])
    for path in sorted(set(before) | set(after)):
        a, b = before.get(path, _ABSENT), after.get(path, _ABSENT)
        if a == b:
            continue
        reason = security_widening(new["type"], path, a, b)
        ignored = any(_covers(i, path) for i in new.get("ignoreChanges", []))
        replace = not ignored and forces_replacement(
            new["type"], path, tuple(new.get("replaceOnChanges", []))
        )
        out.changes.append(Change(path, a, b, replace, reason, ignored))
        _add(out.security, [reason] if reason else [])
    if new["type"] == ROLE_ASSIGNMENT:
        _add(out.security, role_widening(old["inputs"], new["inputs"]))
    if new["type"] == SECURITY_RULE:
        _add(out.security, rule_widening(_rule_name(new), old["inputs"], new["inputs"]))
    old_rules, new_rules = _rules(old["inputs"]), _rules(new["inputs"])
    for name in sorted(set(old_rules) | set(new_rules)):
        if old_rules.get(name) != new_rules.get(name):
            _add(out.security, rule_widening(name, old_rules.get(name), new_rules.get(name)))
    kept = ("protect", "retainOnDelete")
    for option in kept:
        if bool(old.get(option)) != bool(new.get(option)):
            out.changes.append(Change(f"({option})", old.get(option), new.get(option), False, None))
    if any(old.get(o) for o in kept) and not any(new.get(o) for o in kept):
        out.attention.append("deletion protection removed (protect / retainOnDelete)")
    if not out.changes and not out.security:
        return None
    if any(c.replace for c in out.changes):
        out.action = "replace"
    return out


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _config_changes(project: str, base: dict[str, Any], head: dict[str, Any]) -> list[Change]:
    """The stack settings that differ; a change to an open value carries its reason."""
    before, after = flatten(base), flatten(head)
    changes = []
    for path in sorted(set(before) | set(after)):
        a, b = before.get(path, _ABSENT), after.get(path, _ABSENT)
        if a == b:
            continue
        why, widens = CONFIG_OPENING.get(path.removeprefix(f"{project}:"), (None, None))
        reason = why if widens and widens(a, b) else None
        changes.append(Change(path, a, b, False, reason))
    return changes


def _budget_raised(project: str, base: dict[str, Any], head: dict[str, Any]) -> list[str]:
    key = f"{project}:{BUDGET_KEY}"
    a, b = base.get(key), head.get(key)
    if isinstance(b, int | float) and (not isinstance(a, int | float) or b > a):
        return [f"{key}: GPU budget raised from {a if a is not None else '(none)'} to {b} USD/h"]
    return []


def diff(base: dict[str, Any], head: dict[str, Any]) -> Diff:
    old, new = mf.by_key(base), mf.by_key(head)
    resources: list[ResourceDiff] = []
    for key in sorted(set(old) | set(new)):
        if key not in old:
            resources.append(_created(new[key]))
        elif key not in new:
            resources.append(_deleted(old[key]))
        else:
            changed = _changed(old[key], new[key])
            if changed:
                resources.append(changed)
    project = head["project"]
    config = _config_changes(project, base["config"], head["config"])
    attention = _budget_raised(project, base["config"], head["config"])
    return Diff(base["stack"], head["stack"], resources, config, attention)


def _readable(value: Any) -> Any:
    if mf.is_unknown(value):
        return "(known after deploy)"
    if isinstance(value, dict):
        return {k: _readable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_readable(v) for v in value]
    return value


def _show(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    if mf.is_unknown(value):
        return "(known after deploy)"
    return json.dumps(_readable(value), sort_keys=True)


SYMBOLS = {"create": "+", "delete": "-", "update": "~", "replace": "+-"}


def render_text(d: Diff) -> str:
    counts = {a: sum(1 for r in d.resources if r.action == a) for a in SYMBOLS}
    lines = [
        f"Plan diff {d.base} -> {d.head}: {counts['create']} to create, {counts['update']} to "
        f"update, {counts['replace']} to replace, {counts['delete']} to delete"
    ]
    widening = [f"stack setting {c.path}: {c.security}" for c in d.config_security]
    widening += [f"{r.type} {r.name}: {reason}" for r, reason in d.security]
    if widening:
        lines += ["", f"!!! SECURITY-WIDENING CHANGES ({len(widening)}) !!!"]
        lines += [f"!!! {w}" for w in widening]
    attention = [f"stack setting {a}" for a in d.config_attention]
    attention += [f"{r.type} {r.name}: {a}" for r in d.resources for a in r.attention]
    if attention:
        lines += ["", "Needs attention:"] + [f"  {a}" for a in attention]
    if d.config:
        lines += ["", "Stack settings:"]
        for c in d.config:
            mark = f"  [SECURITY: {c.security}]" if c.security else ""
            lines.append(f"      ~ {c.path}: {_show(c.old)} => {_show(c.new)}{mark}")
    lines.append("")
    for r in d.resources:
        lines.append(f"{SYMBOLS[r.action]:<2} {r.type} {r.name}")
        for c in r.changes:
            mark = "  [forces replacement]" if c.replace else ""
            mark += "  [ignored: ignoreChanges]" if c.ignored else ""
            mark += f"  [SECURITY: {c.security}]" if c.security else ""
            lines.append(f"      ~ {c.path}: {_show(c.old)} => {_show(c.new)}{mark}")
    lines += ["", f"exit code {d.exit_code}: {EXIT_CODES[d.exit_code]}"]
    return "\n".join(lines) + "\n"
