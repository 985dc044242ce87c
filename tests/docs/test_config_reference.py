"""The configuration reference is generated from the models the validation is made of
(infra/config/), so a setting cannot be validated without appearing in the reference, nor
appear there with another default or other choices than the validation applies."""

import copy
from typing import Annotated

import pytest
from pydantic import ValidationError

from infra import config
from infra.config.fields import Int, Section, rule, setting
from infra.config.load import config_error
from infra.config.storage import StorageSettings
from infra.config_schema import reference_rows
from tests.support.minimal_config import VALID


def load(values=VALID):
    return config.load_config(copy.deepcopy(values), stack="dev")


def model_keys(model, prefix=""):
    """Every stack key the validation accepts, walking the models themselves."""
    for field in model.model_fields.values():
        yield prefix + field.alias
        for kind in (field.annotation, *getattr(field.annotation, "__args__", ())):
            if isinstance(kind, type) and issubclass(kind, Section):
                sep = "[]." if getattr(field.annotation, "__origin__", None) is tuple else "."
                yield from model_keys(kind, prefix + field.alias + sep)


def test_the_shipped_stacks_and_the_minimal_config_load():
    load()
    for name in ("dev", "prod"):
        config.load_stack_file(f"stacks/Pulumi.{name}.yaml")


def test_every_key_the_validation_accepts_is_in_the_reference():
    keys = list(model_keys(config.StackConfig))
    assert "access.jumpHost.sshPublicKey" in keys and "operators[].objectId" in keys
    assert [row.path for row in reference_rows()] == keys


@pytest.mark.parametrize(
    ("path", "shown", "applied"),
    [
        ("cluster.idleSecondsBeforeScaleDown", "`300`",
         lambda c: c.cluster.idle_seconds_before_scale_down == 300),
        ("storage.dataProtection", '`"protect"`', lambda c: c.storage.data_protection == "protect"),
        ("storage.outputsProtection", "protect in prod, none otherwise",
         lambda c: c.storage.outputs_protection == "none"),
        ("registry.sku", '`"Standard"`', lambda c: c.registry_sku == "Standard"),
        ("imageBuildVmSize", '`"Standard_D4s_v3"`',
         lambda c: c.image_build_vm_size.name == "Standard_D4s_v3"),
    ],
)  # fmt: skip
def test_a_default_in_the_reference_is_the_one_the_validation_applies(path, shown, applied):
    row = next(row for row in reference_rows() if row.path == path)
    assert row.default == shown
    assert applied(load())


def test_the_choices_in_the_reference_are_the_validations():
    row = next(row for row in reference_rows() if row.path == "storage.dataProtection")
    assert row.allowed == "`protect`, `retain`, `none`"
    with pytest.raises(config.ConfigError, match="allowed: protect, retain, none"):
        load({**VALID, "azdl:storage": {"dataProtection": "keep"}})


def test_a_setting_declared_once_reaches_the_validation_the_schema_and_the_reference():
    """What docs/configuration.md ("Adding a setting") tells an engineer to write, and no more."""

    class Storage(StorageSettings):
        soft_delete_days: Annotated[Int, rule(lambda d: d >= 1, "at least 1")] = setting(
            "Days deleted blobs are kept.", 7, allowed="1 or more"
        )

    class Stack(config.StackConfig):
        storage: Storage = setting(Storage.__doc__, {})

    schema = Stack.model_json_schema(by_alias=True)
    row = {row.path: row for row in reference_rows(schema)}["storage.softDeleteDays"]
    assert (row.type, row.default, row.allowed) == ("int", "`7`", "1 or more")
    own = {k.removeprefix("azdl:"): v for k, v in copy.deepcopy(VALID).items()}
    context = {"stack": "dev", "environment": "dev"}
    assert Stack.model_validate(own, context=context).storage.soft_delete_days == 7
    own["storage"] = {"softDeleteDays": 0}
    with pytest.raises(ValidationError) as info:
        Stack.model_validate(own, context=context)
    message = str(config_error(info.value))
    assert message == "azdl:storage.softDeleteDays = 0 is invalid: at least 1"
