"""infra.azure_facts against the sources it names: the provider's own type tokens, Azure's
built-in roles (DOCUMENTED_ROLE_IDS), the Pulumi SDK's unknown sentinel; complete for the
program's plans; free of Pulumi imports."""

import subprocess
import sys
from importlib import import_module

import pulumi.runtime.rpc
import pytest
from pulumi.type_token import get_type_token
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from infra import azure_facts
from infra.azure_facts import BUILT_IN_ROLES, ENGINE_UNKNOWN, ROLE_NAMES, UNKNOWN, lookup
from tests.infra.documented_roles import DOCUMENTED_ROLE_IDS
from tests.shipped import STACK_FILES
from tests.support.renderings import prod_with_jump_host, rendered

TOKENS = {
    name: value
    for name, value in vars(azure_facts).items()
    if isinstance(value, str) and value.startswith("azure-native:")
}


def test_role_ids_are_azures_documented_built_in_roles():
    assert BUILT_IN_ROLES == DOCUMENTED_ROLE_IDS
    assert {ROLE_NAMES[guid] for guid in BUILT_IN_ROLES.values()} == set(BUILT_IN_ROLES)


@pytest.mark.parametrize("token", sorted(TOKENS.values()))
def test_each_type_token_is_the_one_the_provider_registers(token):
    _, module, cls = token.split(":")
    resource_class = getattr(import_module(f"pulumi_azure_native.{module}"), cls)
    assert get_type_token(resource_class) == token


@pytest.mark.slow  # renders both stacks and a variant (seconds)
def test_the_program_declares_no_azure_type_that_is_not_a_fact():
    """Every stack file, and the prod stack with the jump host (the types only it declares)."""
    plans = [rendered(f) for f in STACK_FILES] + [prod_with_jump_host()]
    declared = {r.type for plan in plans for r in plan.resources if r.type.startswith("azure-")}
    assert declared - set(TOKENS.values()) == set()


def test_the_engine_unknown_is_the_sdks():
    assert ENGINE_UNKNOWN == pulumi.runtime.rpc.UNKNOWN == UNKNOWN_STRING_VALUE


def test_lookup_reads_present_absent_and_unknown_values():
    props = {"a": {"b": [10, {"c": "x"}]}, "tags": {"environment": "prod"}}
    assert lookup(props, "a", "b", 1, "c") == "x"
    assert lookup(props, "a", "b", 0) == 10
    assert lookup(props, "a", "missing") is None
    assert lookup(props, "a", "missing", default=()) == ()
    assert lookup(props, "a", "b", 5) is None  # past the end of a list
    assert lookup(props, "tags", "environment", "x") is None  # a string is not indexed
    assert lookup(props, "a", 0) is None  # a mapping is not indexed by position
    assert lookup(props) is props


def test_lookup_sees_the_policy_proxys_unknowns_and_the_manifests():
    proxied = unknown_checking_proxy({"sku": UNKNOWN_STRING_VALUE, "rules": [{"p": 1}]})
    assert lookup(proxied, "sku") is UNKNOWN
    assert lookup(proxied, "rules", 0, "p") == 1
    manifest = {"sku": {azure_facts.UNKNOWN_KEY: ["storage"]}, "other": {"$unknown": 1, "x": 2}}
    assert lookup(manifest, "sku") is UNKNOWN
    assert lookup(manifest, "sku", "name") is UNKNOWN
    assert lookup(manifest, "other") == {"$unknown": 1, "x": 2}  # not a marker: more keys


def test_the_facts_the_config_and_the_outputs_load_no_pulumi():
    """The policy pack and the CLI read the facts and the outputs' model, and infra.config
    validates stack files, without the Pulumi SDK or the provider."""
    code = (
        "import sys, infra.azure_facts, infra.config, infra.exports; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pulumi', 'pulumi_azure_native', 'pulumi_policy')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"
