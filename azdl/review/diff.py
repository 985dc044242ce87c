"""Compare two plan manifests: what is added, removed and changed, per property.

Changes that force a replacement come from `replacements.yaml` (data, not code). Changes that
widen access are flagged as security-widening. `Diff.exit_code` tells CI whether a reviewer
must look: see `EXIT_CODES`.
"""

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from azdl.review import manifest as mf

REPLACEMENTS_FILE = Path(__file__).with_name("replacements.yaml")
EXIT_CODES = {
    0: "no resource changes",
    1: "changes, all routine (in-place updates, additions that widen nothing)",
    2: "error (bad input)",
    3: "needs a reviewer's attention: a replacement, a removal, removed deletion protection "
    "or a security-widening change",
}
TLS_ORDER = {"TLS1_0": 0, "TLS1_1": 1, "TLS1_2": 2, "TLS1_3": 3}
ROLE_NAMES = {
    "8e3af657-a8ff-404c-9d86-bca7d93b5e97": "Owner",
    "b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
    "18d7d88d-d35e-4fb5-a5c3-7773c6a72089": "User Access Administrator",
    "7f951dda-4ed3-4680-a7ca-43fe172d538d": "AcrPull",
    "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1": "Storage Blob Data Reader",
    "ba92f5b4-2d11-453d-a403-e96b0029c9fe": "Storage Blob Data Contributor",
}
_ABSENT = object()
_RULE = re.compile(r"^securityRules\[(?P<rule>[^\]]+)\]\.")


@cache
def replacement_paths() -> dict[str, tuple[str, ...]]:
    raw = yaml.safe_load(REPLACEMENTS_FILE.read_text())
    return {k: tuple(v) for k, v in raw.items()}


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
    """Whether changing `path` replaces the resource: from replacements.yaml, or from the
    resource's own `replaceOnChanges` option (`declared`)."""
    table = replacement_paths()
    for listed in table.get("*", ()) + table.get(resource_type, ()) + tuple(declared):
        if _covers(listed, path):
            return True
    return False


def _role(role_id: Any) -> str:
    guid = str(role_id).rstrip("/").rsplit("/", 1)[-1].lower()
    return ROLE_NAMES.get(guid, guid)


def _inbound_allow(rule: dict[str, Any]) -> bool:
    return rule.get("direction") == "Inbound" and rule.get("access") == "Allow"


def security_widening(resource_type: str, path: str, old: Any, new: Any) -> str | None:
    """Why changing `path` from `old` to `new` widens access, or None."""
    leaf = path.rsplit(".", 1)[-1]
    if leaf == "publicNetworkAccess" and new != "Disabled" and old == "Disabled":
        return "public network access turned on"
    if leaf == "minimumTlsVersion" and TLS_ORDER.get(new, -1) < TLS_ORDER.get(old, -1):
        return "minimum TLS version lowered"
    if leaf == "allowBlobPublicAccess" and new is True:
        return "anonymous blob access allowed"
    if leaf == "publicAccess" and new not in (None, "None", _ABSENT):
        return "blob container made public"
    if leaf == "enableNodePublicIp" and new is not False and old is False:
        return "cluster nodes get public IPs"
    if leaf == "remoteLoginPortPublicAccess" and old == "Disabled" and new != "Disabled":
        return "SSH port opened on cluster nodes"
    if leaf == "adminUserEnabled" and new is True:
        return "registry admin user enabled"
    if leaf == "defaultAction" and old == "Deny" and new != "Deny":
        return "firewall default action no longer Deny"
    if ".ipRules" in f".{path}" and new is not _ABSENT and new != old and new not in ([], None):
        return "firewall admits more internet addresses"
    if leaf in ("allowSharedKeyAccess",) and new is True:
        return "shared-key (account key) access allowed"
    if leaf == "enableHttpsTrafficOnly" and new is False and old is True:
        return "plain HTTP allowed"
    if leaf == "disableLocalAuth" and old is True and new is not True:
        return "local (key) authentication enabled"
    if resource_type == "azure-native:authorization:RoleAssignment":
        if leaf == "roleDefinitionId" and old is not _ABSENT:
            return f"role changed from {_role(old)} to {_role(new)}"
        if leaf == "scope" and old is not _ABSENT:
            return "role assignment scope changed"
    return None


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

    @property
    def security(self) -> list[tuple[ResourceDiff, str]]:
        return [(r, s) for r in self.resources for s in r.security]

    @property
    def exit_code(self) -> int:
        if not self.resources:
            return 0
        if any(
            r.security or r.attention or r.action in ("delete", "replace") for r in self.resources
        ):
            return 3
        return 1

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
            "resources": [resource(r) for r in self.resources],
        }


def _created(res: dict[str, Any]) -> ResourceDiff:
    out = ResourceDiff(res["key"], res["type"], res["name"], "create")
    inputs = res["inputs"]
    if res["type"] == "azure-native:authorization:RoleAssignment":
        out.security.append(f"new role assignment: {_role(inputs.get('roleDefinitionId'))}")
    if res["type"] == "azure-native:network:SecurityRule" and _inbound_allow(inputs):
        out.security.append("new inbound allow rule")
    for rule in inputs.get("securityRules") or []:
        if isinstance(rule, dict) and _inbound_allow(rule):
            out.security.append(f"new inbound allow rule {rule.get('name')}")
    for path, new in flatten(inputs).items():
        reason = security_widening(res["type"], path, _ABSENT, new)
        if reason and reason not in out.security:
            out.security.append(reason)
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
        if reason and reason not in out.security:
            out.security.append(reason)
    old_rules = {r.get("name"): r for r in old["inputs"].get("securityRules") or []}
    for rule in new["inputs"].get("securityRules") or []:
        prior = old_rules.get(rule.get("name"))
        if _inbound_allow(rule) and (
            prior is None
            or not _inbound_allow(prior)
            or (prior.get("sourceAddressPrefix"), prior.get("sourceAddressPrefixes"))
            != (rule.get("sourceAddressPrefix"), rule.get("sourceAddressPrefixes"))
        ):
            out.security.append(f"inbound allow rule {rule.get('name')} added or widened")
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


def diff(base: dict[str, Any], head: dict[str, Any]) -> Diff:
    old, new = mf.by_key(base), mf.by_key(head)
    resources: list[ResourceDiff] = []
    for key in sorted(set(old) | set(new)):
        if key not in old:
            resources.append(_created(new[key]))
        elif key not in new:
            res = old[key]
            gone = ResourceDiff(key, res["type"], res["name"], "delete")
            gone.attention.append("removed: Azure deletes it")
            resources.append(gone)
        else:
            changed = _changed(old[key], new[key])
            if changed:
                resources.append(changed)
    before, after = flatten(base["config"]), flatten(head["config"])
    config = [
        Change(path, before.get(path, _ABSENT), after.get(path, _ABSENT), False, None)
        for path in sorted(set(before) | set(after))
        if before.get(path, _ABSENT) != after.get(path, _ABSENT)
    ]
    return Diff(base["stack"], head["stack"], resources, config)


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
    if d.security:
        lines += ["", f"!!! SECURITY-WIDENING CHANGES ({len(d.security)}) !!!"]
        lines += [f"!!! {r.type} {r.name}: {reason}" for r, reason in d.security]
    attention = [(r, a) for r in d.resources for a in r.attention]
    if attention:
        lines += ["", "Needs attention:"] + [f"  {r.type} {r.name}: {a}" for r, a in attention]
    if d.config:
        lines += ["", "Stack settings:"]
        lines += [f"      ~ {c.path}: {_show(c.old)} => {_show(c.new)}" for c in d.config]
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
