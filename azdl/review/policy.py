"""Run the CrossGuard policies (`policies/rules/`) offline against a plan manifest: the same
policy objects, given what `pulumi preview --policy-pack policies` would give them."""

import contextlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy

import policies
from azdl.review import manifest as mf

RULES_PACKAGE = Path(policies.__file__).resolve().parent / "rules"  # package data, installed
BUDGET_KEY = "maxGpuSpendPerHourUsd"


def load_rules() -> ModuleType:
    """The pack's `rules` package, imported under the name it has in the pack (`rules`, with
    the pack's folder on the path) from wherever azdl is installed."""
    if "rules" in sys.modules:
        return sys.modules["rules"]
    spec = importlib.util.spec_from_file_location(
        "rules", RULES_PACKAGE / "__init__.py", submodule_search_locations=[str(RULES_PACKAGE)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["rules"] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Finding:
    policy: str
    severity: str
    mandatory: bool
    resource: str | None  # manifest key; None for the stack as a whole
    message: str


def _engine_value(value: Any) -> Any:
    """Manifest JSON back to what the engine hands a policy (unknowns as sentinels)."""
    if mf.is_unknown(value):
        return UNKNOWN_STRING_VALUE
    if isinstance(value, dict):
        return {k: _engine_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_engine_value(v) for v in value]
    return value


def _urn(doc: dict[str, Any], key: str) -> str:
    return f"urn:pulumi:{doc['stack']}::{doc['project']}::{key}"


def _options(doc: dict[str, Any], res: dict[str, Any]) -> PolicyResourceOptions:
    parent = _urn(doc, res["parent"]) if res.get("parent") else None
    return PolicyResourceOptions(
        protect=bool(res.get("protect")),
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
        parent=parent,
    )


def policy_config(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per-policy config from the stack's settings (also the `--policy-pack-config` file)."""
    budget = doc["config"].get(f"{doc['project']}:{BUDGET_KEY}")
    return {"gpu-spend-within-budget": {} if budget is None else {BUDGET_KEY: budget}}


def stack_resources(doc: dict[str, Any], views: list[tuple[dict, Any]]) -> list[PolicyResource]:
    """The plan's resources as the engine hands them to a stack validation: each with its
    parent, dependencies and property dependencies as resource objects, and (as the engine
    gives every custom resource) a provider."""
    by_urn: dict[str, PolicyResource] = {}
    for res, props in views:
        urn = _urn(doc, res["key"])
        package = res["type"].split(":", 1)[0]
        provider = None
        if res.get("custom", True):
            provider_urn = _urn(doc, f"pulumi:providers:{package}::default")
            provider = PolicyProviderResource(
                f"pulumi:providers:{package}", {}, provider_urn, "default"
            )
        by_urn[urn] = PolicyResource(
            res["type"], props, urn, res["name"], _options(doc, res), provider, None, [], {}
        )
    for res, _props in views:
        resource = by_urn[_urn(doc, res["key"])]
        if res.get("parent"):
            resource.parent = by_urn.get(_urn(doc, res["parent"]))
        resource.dependencies = [
            by_urn[_urn(doc, k)] for k in res.get("dependsOn", []) if _urn(doc, k) in by_urn
        ]
        # dependsOn is what the SDK sent: explicit and property dependencies together.
    return list(by_urn.values())


def check(doc: dict[str, Any]) -> list[Finding]:
    """Every violation of every policy for the plan `doc`, in a stable order."""
    rules = load_rules()
    config = policy_config(doc)
    findings: list[Finding] = []
    views = []
    for res in doc["resources"]:
        props = unknown_checking_proxy(_engine_value(res["inputs"]))
        views.append((res, props))
    resources = stack_resources(doc, views)
    for policy in rules.POLICIES:
        mandatory = policy.enforcement_level.value == "mandatory"
        policy_conf = config.get(policy.name, {})

        def report(message: str, key: str | None, p=policy, m=mandatory) -> None:
            findings.append(Finding(p.name, p.severity.value, m, key, message))

        if not isinstance(policy, ResourceValidationPolicy):
            args = StackValidationArgs(resources, policy_conf)
            keys = {_urn(doc, r["key"]): r["key"] for r in doc["resources"]}
            policy.validate(
                args, lambda message, urn=None, r=report, k=keys: r(message, k.get(urn or ""))
            )
            continue
        for res, props in views:
            urn, opts = _urn(doc, res["key"]), _options(doc, res)
            args = ResourceValidationArgs(
                res["type"], props, urn, res["name"], opts, None, policy_conf
            )
            # A value known only after deployment: Pulumi skips the check the same way.
            with contextlib.suppress(UnknownValueError):
                policy.validate(
                    args, lambda message, urn=None, k=res["key"], r=report: r(message, k)
                )
    return findings
