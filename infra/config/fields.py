"""How a setting is declared and checked: `setting(...)`, the value types and checks a field
takes, `Section` (the base of every section model) and the errors a check raises."""

import difflib
import ipaddress
import re
from collections.abc import Callable, Mapping
from functools import partial
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from infra.catalogue import VM_SIZES, VmSize
from infra.naming import rule_violation

PROJECT = "azdl"
GUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_GROUP = rf"/subscriptions/{GUID}/resourceGroups/[-\w.()]{{1,90}}/providers/"
_VNET = r"Microsoft\.Network/virtualNetworks/[-\w.]{2,64}"
ID_EXAMPLE = "/subscriptions/<guid>/resourceGroups/<rg>/providers/Microsoft.Network/"
ARM_ID_PATTERNS = {  # kind -> (pattern, an example) for resource ids a stack may name
    "subnet": (_GROUP + _VNET + r"/subnets/[-\w.]{1,80}",
               ID_EXAMPLE + "virtualNetworks/<vnet>/subnets/<subnet>"),
    "virtual network": (_GROUP + _VNET, ID_EXAMPLE + "virtualNetworks/<vnet>"),
    "private DNS zone": (_GROUP + r"Microsoft\.Network/privateDnsZones/[-\w.]+",
                         ID_EXAMPLE + "privateDnsZones/<zone>"),
}  # fmt: skip


class ConfigError(ValueError):
    """An invalid stack setting; the message names the key, the bad value and what is allowed."""


class Invalid(ValueError):
    """Raised by a check: `value` is not allowed. `at` names a sub-key (or `[i]`) below the
    checked one; the key itself comes from where pydantic met the value."""

    def __init__(self, value: Any, allowed: str, at: str = ""):
        super().__init__(allowed)
        self.value, self.allowed, self.at = value, allowed, at


class Missing(ValueError):
    """Raised by a check: the sub-key `at` is required but missing (`note` says more)."""

    def __init__(self, at: str, note: str = ""):
        super().__init__(at)
        self.at, self.note = at, note


# ---- declaring a setting ---------------------------------------------------------------------
REQUIRED: Any = ...  # the default of a setting that has none


def setting(
    description: str,
    default: Any = REQUIRED,
    *,
    allowed: str | None = None,
    default_words: str | None = None,
    by_environment: Mapping[str, Any] | None = None,
    example: Any = None,
    source: str | None = None,
    alias: str | None = None,
) -> Any:
    """One setting's declaration. `default_words`: a default derived from other keys, in words
    (the field's default is None; a validator fills it in). `by_environment`: a default per
    environment, `{"prod": ..., "*": ...}`, filled in by `Section`. `example`: a value for the
    reference's `pulumi config set` lines. `source`: where the rule comes from (a URL)."""
    extra = {"x-allowed": allowed, "x-example": example, "x-source": source}
    if by_environment is not None:
        default = None
        extra["x-default-by-environment"] = dict(by_environment)
        default_words = default_words or ", ".join(
            f"{v} {'otherwise' if k == '*' else 'in ' + k}" for k, v in by_environment.items()
        )
    extra["x-default"] = default_words
    if default_words is not None and default is REQUIRED:
        default = None
    fixed = default is not REQUIRED and default_words is None
    return Field(
        default,
        alias=alias,
        description=description,
        validate_default=fixed,
        json_schema_extra={k: v for k, v in extra.items() if v is not None},
    )


def rule(ok: Callable[[Any], Any], allowed: str | Callable[[Any], str], shown=None) -> Any:
    """A check on a value already of its type: where `ok(value)` is false the value is invalid,
    and the message says `allowed` (or `allowed(value)`), showing `shown(value)` if given."""

    def check(value: Any) -> Any:
        if not ok(value):
            words = allowed(value) if callable(allowed) else allowed
            raise Invalid(shown(value) if shown else value, words)
        return value

    return AfterValidator(check)


Str = Annotated[str, Strict()]
Int = Annotated[int, Strict()]
Float = Annotated[float, Strict()]
Bool = Annotated[bool, Strict()]


def one_of(choices: tuple[str, ...] | Mapping[str, str]) -> Any:
    """A string from `choices` (a mapping: its keys, validated to its values)."""

    def check(value: str) -> str:
        if value not in choices:
            raise Invalid(value, f"allowed: {', '.join(choices)}")
        return choices[value] if isinstance(choices, Mapping) else value

    schema = WithJsonSchema({"type": "string", "enum": list(choices)})
    return Annotated[str, Strict(), AfterValidator(check), schema]


def matching(pattern: str, allowed: str) -> Any:
    """A string matching `pattern` in full."""
    schema = WithJsonSchema({"type": "string", "pattern": f"^(?:{pattern})$"})
    return Annotated[str, Strict(), rule(lambda v: re.fullmatch(pattern, v), allowed), schema]


def azure_name(kind: str) -> Any:
    """An Azure name that keeps `kind`'s naming rule (infra/naming.py)."""
    return Annotated[
        Str, rule(lambda v: not rule_violation(kind, v), partial(rule_violation, kind))
    ]


def arm_id(kind: str) -> Any:
    pattern, example = ARM_ID_PATTERNS[kind]

    def check(value: Any) -> str:
        if not isinstance(value, str) or not re.fullmatch(pattern, value, re.IGNORECASE):
            raise Invalid(value, f"a {kind} resource id, {example}")
        return value

    return Annotated[str, BeforeValidator(check), WithJsonSchema({"type": "string"})]


def _to_cidr(value: Any) -> ipaddress.IPv4Network:
    if not isinstance(value, str):
        raise Invalid(value, "must be a string")
    try:
        return ipaddress.IPv4Network(value)
    except ValueError as exc:
        raise Invalid(value, f"an IPv4 CIDR block such as 10.40.0.0/16 ({exc})") from None


Cidr = Annotated[
    ipaddress.IPv4Network,
    BeforeValidator(_to_cidr),
    WithJsonSchema({"type": "string", "pattern": r"^\d{1,3}(\.\d{1,3}){3}/\d{1,2}$"}),
]


def _to_vm_size(value: Any) -> VmSize:
    if not isinstance(value, str):
        raise Invalid(value, "must be a string")
    if value not in VM_SIZES:
        raise Invalid(value, f"a VM size from infra/vm_sizes.yaml: {', '.join(sorted(VM_SIZES))}")
    return VM_SIZES[value]


VM_SIZE_NAMES = WithJsonSchema({"type": "string", "enum": sorted(VM_SIZES)})
VmSizeName = Annotated[VmSize, BeforeValidator(_to_vm_size), VM_SIZE_NAMES]


class Section(BaseModel):
    """A structured key: an object of known sub-keys (camelCase of the field names)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, arbitrary_types_allowed=True
    )

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, raw: Any, info: ValidationInfo) -> Any:
        known = [f.alias for f in cls.model_fields.values()]
        if not isinstance(raw, Mapping):
            raise Invalid(raw, f"an object with the keys {', '.join(known)}")
        unknown = sorted(set(raw) - set(known))
        if unknown:
            near = difflib.get_close_matches(unknown[0], known, n=1, cutoff=0.6)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise Invalid(
                raw[unknown[0]], f"unknown key; known: {', '.join(known)}{hint}", unknown[0]
            )
        for field in cls.model_fields.values():
            if field.is_required() and field.alias not in raw:
                raise Missing(field.alias)
        environment = (info.context or {}).get("environment")
        filled = dict(raw)
        for field in cls.model_fields.values():
            per_env = (field.json_schema_extra or {}).get("x-default-by-environment")
            if per_env and field.alias not in raw:
                filled[field.alias] = per_env.get(environment, per_env["*"])
        return filled
