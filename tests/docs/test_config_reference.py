"""The configuration reference is generated from infra/config.py's CONFIG_KEYS, and the
validation checks itself against that table, so a key cannot be validated without appearing in
the reference (or appear with the wrong type, default or choices)."""

import copy
import dataclasses

import pytest

from infra import config
from infra.config import CONFIG_KEYS, load_stack_file
from tests.infra.test_infra_config import VALID


def load(values=VALID):
    return config.load_config(copy.deepcopy(values), stack="dev")


def test_the_shipped_stacks_and_the_minimal_config_agree_with_the_table():
    load()
    for name in ("dev", "prod"):
        load_stack_file(f"stacks/Pulumi.{name}.yaml")


@pytest.mark.parametrize(
    ("key", "change", "named"),
    [
        ("cluster.idleSecondsBeforeScaleDown", {"default": 301}, "default 301"),
        ("cluster.maxNodes", {"type": float}, "declares float"),
        ("storage.dataProtection", {"allowed": ("protect", "none")}, "allows"),
        ("cluster.nodePublicIp", None, "does not declare"),
        ("images", None, "CONFIG_KEYS' top-level"),
    ],
)
def test_a_declaration_that_differs_from_the_validation_fails_every_load(
    monkeypatch, key, change, named
):
    keys = dict(CONFIG_KEYS)
    if change is None:
        del keys[key]
    else:
        keys[key] = dataclasses.replace(keys[key], **change)
    monkeypatch.setattr(config, "CONFIG_KEYS", keys)
    with pytest.raises(LookupError, match=named):
        load()


def test_a_declared_key_the_validation_does_not_accept_fails(monkeypatch):
    keys = dict(CONFIG_KEYS)
    keys["cluster.gpuDriver"] = config.Key("cluster.gpuDriver", str, "not validated", default="")
    monkeypatch.setattr(config, "CONFIG_KEYS", keys)
    with pytest.raises(LookupError, match="gpuDriver"):
        load()


def test_list_items_are_declared_once_for_every_index(monkeypatch):
    keys = dict(CONFIG_KEYS)
    keys["operators[].objectId"] = config.Key("operators[].objectId", str, "an item's key")
    keys.pop("operators[].name", None)  # declared in the real table: undeclare it here
    monkeypatch.setattr(config, "CONFIG_KEYS", keys)
    assert config._declared("operators[3].objectId") is keys["operators[].objectId"]
    with pytest.raises(LookupError, match=r"azdl:operators\[\]\.name"):
        config._declared("operators[3].name")
