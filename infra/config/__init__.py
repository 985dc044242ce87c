"""The stack's configuration: every `azdl:` setting declared once, as a typed pydantic model.

`load_config(values, stack=...)` turns the `azdl:*` keys of a stack (as Pulumi hands them
over, or as read from `stacks/Pulumi.<stack>.yaml` by `load_stack_file`) into one frozen
`StackConfig`. Every problem raises `ConfigError` with the key, the bad value and what is
allowed. Pure Python (no Pulumi import) so the CLI can validate a stack file cheaply.

From the models come the validation, the configuration reference (docs/configuration.md,
through `infra.config_schema.reference_rows`), the stack files' JSON Schema
(`stacks/azdl.schema.json`) and the typed declarations in `Pulumi.yaml`. The modules:
`fields` (how a setting is declared and checked), one per section (`network`, `storage`,
`compute`: cluster, registry and images, `access`: operators and the jump host,
`resource_groups`: existing groups to deploy into), `stack` (the
top-level keys and the rules across sections) and `load` (from Pulumi or a stack file).

How to add a setting (one place):
1. Add a field to the section's model (`NetworkSettings`, `StorageSettings`, `ClusterSettings`,
   ..., or `StackConfig` for a top-level key), declared with `setting(...)`: the description,
   the default (`REQUIRED`, a value, `default_words=` for one derived from other keys,
   `by_environment=` for one per environment), `allowed=` (the rule in words) and `source=`
   (where the rule comes from). The field's name is snake_case; the stack key is its camelCase.
2. Give it a type: `Str`, `Int`, `Float`, `Bool`, `one_of(...)` for choices, `Cidr`,
   `VmSizeName`, `matching(pattern, allowed)`, `azure_name(kind)`, `arm_id(kind)`, or
   `Annotated[Int, rule(lambda n: n >= 1, "at least 1")]` for a rule of its own (a longer
   check is a function that raises `Invalid(value, allowed)`).
   A rule across keys goes in the model's `model_validator` (or, across sections, a
   `field_validator` of `StackConfig` that reads the earlier section from `info.data`).
3. Run `python -m infra.config_schema` (rewrites the schema and Pulumi.yaml's declarations);
   the docs page regenerates itself.
"""

from infra.config.access import Operator
from infra.config.compute import IMAGE_FRAMEWORKS
from infra.config.fields import PROJECT, ConfigError
from infra.config.load import (
    PROVIDER_LOCATION_KEY,
    SCHEMA,
    STRING_KEYS,
    json_type,
    load_config,
    load_stack_file,
    read_stack_file,
    stack_name_of,
    with_subscription,
)
from infra.config.network import ENDPOINT_DNS_ZONES
from infra.config.stack import StackConfig

# What the program, the CLI and the schema read: loading and validating a stack, the model it
# gives, and the few constants they share. Declaring a setting takes `infra.config.fields`.
__all__ = [
    "ENDPOINT_DNS_ZONES", "IMAGE_FRAMEWORKS", "PROJECT", "PROVIDER_LOCATION_KEY", "SCHEMA",
    "STRING_KEYS", "ConfigError", "Operator", "StackConfig", "json_type", "load_config",
    "load_stack_file", "read_stack_file", "stack_name_of", "with_subscription",
]  # fmt: skip
