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

from infra.azure_facts import REQUIRED_TAGS
from infra.config.access import (
    BASTION_SKUS,
    PRINCIPAL_TYPES,
    RESERVED_ADMIN_NAMES,
    SSH_KEY_TYPES,
    AccessSettings,
    JumpHostConfig,
    Operator,
)
from infra.config.compute import (
    IMAGE_FRAMEWORKS,
    NOT_IMAGE_BUILD,
    PRIORITIES,
    REGISTRY_SKUS,
    ClusterSettings,
    ImagesSettings,
    RegistrySettings,
)
from infra.config.fields import (
    ARM_ID_PATTERNS,
    PROJECT,
    REQUIRED,
    VM_SIZE_NAMES,
    Bool,
    Cidr,
    ConfigError,
    Float,
    Int,
    Invalid,
    Missing,
    Str,
    VmSizeName,
    _Section,
    arm_id,
    azure_name,
    matching,
    one_of,
    rule,
    setting,
)
from infra.config.load import (
    KEYS,
    OBJECT_KEYS,
    PROVIDER_LOCATION_KEY,
    SCHEMA,
    STRING_KEYS,
    TYPE_WORDS,
    _config_error,
    json_type,
    load_config,
    load_stack_file,
    read_stack_file,
    stack_name_of,
    with_subscription,
)
from infra.config.network import (
    ADDRESS_PLAN_KEYS,
    DNS_ZONE_GROUP_MODES,
    ENDPOINT_DNS_ZONES,
    NETWORK_MODES,
    OUTBOUND_MODES,
    PRIVATE_DNS_ZONES,
    ExistingSubnets,
    NetworkSettings,
    ZoneIds,
)
from infra.config.resource_groups import ResourceGroupsSettings
from infra.config.stack import ENVIRONMENTS, NamePrefix, NameSuffix, Region, StackConfig, Tags
from infra.config.storage import (
    DATA_PROTECTION,
    MIN_NFS_SHARE_GIB,
    OUTPUTS_REDUNDANCY,
    WORKSPACE_STORAGE_MODES,
    ZONE_REDUNDANT,
    StorageSettings,
)

__all__ = [
    "ADDRESS_PLAN_KEYS", "ARM_ID_PATTERNS", "BASTION_SKUS", "DATA_PROTECTION",
    "DNS_ZONE_GROUP_MODES", "ENDPOINT_DNS_ZONES", "ENVIRONMENTS", "IMAGE_FRAMEWORKS", "KEYS",
    "MIN_NFS_SHARE_GIB", "NETWORK_MODES", "NOT_IMAGE_BUILD", "OBJECT_KEYS", "OUTBOUND_MODES",
    "OUTPUTS_REDUNDANCY", "PRINCIPAL_TYPES", "PRIORITIES", "PRIVATE_DNS_ZONES", "PROJECT",
    "PROVIDER_LOCATION_KEY", "REGISTRY_SKUS", "REQUIRED", "REQUIRED_TAGS", "RESERVED_ADMIN_NAMES",
    "SCHEMA", "SSH_KEY_TYPES", "STRING_KEYS", "TYPE_WORDS", "VM_SIZE_NAMES",
    "WORKSPACE_STORAGE_MODES", "ZONE_REDUNDANT", "AccessSettings", "Bool", "Cidr",
    "ClusterSettings", "ConfigError", "ExistingSubnets", "Float", "ImagesSettings", "Int",
    "Invalid", "JumpHostConfig", "Missing", "NamePrefix", "NameSuffix", "NetworkSettings",
    "Operator", "Region", "RegistrySettings", "ResourceGroupsSettings", "StackConfig",
    "StorageSettings", "Str", "Tags", "VmSizeName", "ZoneIds", "_Section", "_config_error",
    "arm_id", "azure_name", "json_type",
    "load_config", "load_stack_file", "matching", "one_of", "read_stack_file", "rule", "setting",
    "stack_name_of", "with_subscription",
]  # fmt: skip
