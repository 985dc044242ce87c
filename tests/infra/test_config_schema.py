"""The stack files' JSON Schema and Pulumi.yaml's declarations come from infra/config/'s models,
and the schema accepts the shipped stacks and rejects a bad one as `azdl plan` does.

The schema is checked with the `jsonschema` library against the JSON Schema 2020-12
meta-schema (json-schema.org/draft/2020-12/schema, 2026-11), the dialect yaml-language-server
reads from the `# yaml-language-server: $schema=...` line."""

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from infra.config import ConfigError, load_config
from infra.config_schema import (
    REGENERATE,
    SCHEMA_FILE,
    project_file_text,
    pulumi_project_config,
    schema_text,
)

ROOT = Path(__file__).resolve().parents[2]
STACKS = ("dev", "prod")


def stack_document(name: str) -> dict:
    return yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())


def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))


def test_the_committed_schema_is_the_one_the_models_give():
    assert SCHEMA_FILE.read_text() == schema_text(), (
        f"stacks/azdl.schema.json is out of date: run `{REGENERATE}`"
    )
    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA_FILE.read_text()))


def test_pulumi_yaml_declares_the_keys_pulumi_can_check():
    assert (ROOT / "Pulumi.yaml").read_text() == project_file_text(), (
        f"Pulumi.yaml's config: section is out of date: run `{REGENERATE}`"
    )
    declared = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"]
    assert declared == pulumi_project_config()
    assert set(declared) == {"environment", "location", "namePrefix", "imageBuildVmSize"}
    assert declared["imageBuildVmSize"]["default"] == "Standard_D4s_v3"
    # Pulumi's project config types (pulumi.com/docs/iac/concepts/projects/project-file/)
    assert {d["type"] for d in declared.values()} <= {"string", "integer", "boolean", "array"}


@pytest.mark.parametrize("name", STACKS)
def test_the_shipped_stacks_point_editors_at_the_schema_and_keep_to_it(name):
    text = (ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text()
    assert text.splitlines()[0] == "# yaml-language-server: $schema=azdl.schema.json"
    assert list(validator().iter_errors(stack_document(name))) == []


def bad_dev(change) -> dict:
    document = copy.deepcopy(stack_document("dev"))
    change(document["config"])
    return document


BAD = [
    # an unknown azdl: key
    (lambda c: c.update({"azdl:clustr": {}}), "additionalProperties", ("config",), "clustr"),
    # a value outside the allowed ones
    (lambda c: c["azdl:network"].update(mode="public"), "enum", ("config", "azdl:network", "mode"),
     "serviceEndpoints"),
    # a wrong type
    (lambda c: c["azdl:cluster"].update(maxNodes="2"), "type",
     ("config", "azdl:cluster", "maxNodes"), "integer"),
    # an unknown sub-key
    (lambda c: c["azdl:storage"].update(nfsShareGib=100), "additionalProperties",
     ("config", "azdl:storage"), "nfsShareGib"),
    # a required key missing
    (lambda c: c.pop("azdl:cluster"), "required", ("config",), "azdl:cluster"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "validator_kind", "path", "named"), BAD)
def test_a_bad_stack_is_rejected_by_the_schema_and_by_the_validation(
    change, validator_kind, path, named
):
    document = bad_dev(change)
    errors = list(validator().iter_errors(document))
    assert len(errors) == 1, [e.message for e in errors]
    assert errors[0].validator == validator_kind
    assert tuple(errors[0].absolute_path) == path
    assert named in errors[0].message
    with pytest.raises(ConfigError):
        load_config(document["config"], stack="dev")


def test_other_providers_keys_stay_allowed():
    document = bad_dev(lambda c: c.update({"azure-native:subscriptionId": "x", "pulumi:tags": {}}))
    assert list(validator().iter_errors(document)) == []


WRONG_VALUES = [None, 1, -1, 1.5, True, "", "x", "10.0.0.0/8", [], ["x"], {}, {"a": 1}]


def with_value(config: dict, path: str, value) -> dict | None:
    """`config` with the key at `path` (a reference row's, `operators[]` = the first item) set
    to `value`; None where the path does not exist in this stack."""
    config = copy.deepcopy(config)
    target, key = config, f"azdl:{path.split('.')[0].removesuffix('[]')}"
    for part in path.replace("[]", ".0").split(".")[1:]:
        target = target.setdefault(key, {}) if isinstance(target, dict) else target[key]
        key = int(part) if isinstance(target, list) else part
        if not isinstance(target, list | dict) or (isinstance(target, list) and key >= len(target)):
            return None
    target[key] = value
    return config


@pytest.mark.parametrize("name", STACKS)
def test_any_wrong_value_of_any_key_is_a_config_error_in_the_projects_words(name):
    """Every key the reference lists, set to values of every JSON type: the validation either
    takes the value or says what is wrong in its own words, never a traceback or pydantic's."""
    from infra.config_schema import reference_rows

    base = stack_document(name)["config"]
    base["azdl:operators"] = [{"objectId": "00000000-0000-0000-0000-000000000000",
                               "principalType": "User"}]  # fmt: skip
    if name == "prod":
        jump_host = {"bastionSubnet": "10.50.17.0/26", "jumpHostSubnet": "10.50.18.0/29",
                     "sshPublicKey": "ssh-ed25519 AAAAC3Nza admin"}  # fmt: skip
        base["azdl:access"] = {"jumpHost": jump_host}
    load_config(base, stack=name)
    refused = 0
    for row in reference_rows():
        for value in WRONG_VALUES:
            config = with_value(base, row.path, value)
            if config is None:
                continue
            try:
                load_config(config, stack=name)
            except ConfigError as error:
                refused += 1
                message = str(error)
                assert message.startswith("azdl:"), message
                assert "Input should" not in message and "validation error" not in message
    assert refused > 500
