"""Compare two plan manifests: what is added, removed and changed, per property.

Which changes force a replacement is `replacement`'s, which widen access `widening`'s.
`Diff.exit_code` tells CI whether a reviewer must look: see `EXIT_CODES`.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from azdl.review import manifest as mf
from azdl.review.replacement import covers, forces_replacement
from azdl.review.widening import (
    ABSENT,
    CONFIG_OPENING,
    NEW,
    SCOPE_LEVELS,
    ranked_role,
    role_widening,
    rule_widening,
    scope_level,
    security_widening,
)
from infra.azure_facts import ROLE_ASSIGNMENT, SECURITY_RULE

EXIT_CODES = {
    0: "no changes",
    1: "changes, all routine (in-place updates, additions that widen nothing, other settings)",
    2: "error (bad input)",
    3: "needs a reviewer's attention: a replacement, a removal, removed deletion protection, "
    "a security-widening change or a raised GPU budget",
}
BUDGET_KEY = "maxGpuSpendPerHourUsd"


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
            return "<absent>" if v is ABSENT else v

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
        role, _rank = ranked_role(inputs.get("roleDefinitionId"))
        level = scope_level(inputs.get("scope"))
        on = "" if level is None else f" on a {SCOPE_LEVELS[level]}"
        out.security.append(f"new role assignment: {role}{on}")
    if res["type"] == SECURITY_RULE:
        _add(out.security, rule_widening(_rule_name(res), None, inputs))
    for name, rule in _rules(inputs).items():
        _add(out.security, rule_widening(name, None, rule))
    for path, new in flatten(inputs).items():
        reason = security_widening(res["type"], path, NEW, new)
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
        a, b = before.get(path, ABSENT), after.get(path, ABSENT)
        if a == b:
            continue
        reason = security_widening(new["type"], path, a, b)
        ignored = any(covers(i, path) for i in new.get("ignoreChanges", []))
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


def _config_changes(project: str, base: dict[str, Any], head: dict[str, Any]) -> list[Change]:
    """The stack settings that differ; a change to an open value carries its reason."""
    before, after = flatten(base), flatten(head)
    changes = []
    for path in sorted(set(before) | set(after)):
        a, b = before.get(path, ABSENT), after.get(path, ABSENT)
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
    if value is ABSENT:
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
