"""The stack's outputs, declared once: each key with its type, what it holds and whether the job
tools need it. The program exports them (`exported`), the CLI parses them back into
`StackOutputs` (azdl/jobs/stack_outputs.py) and the docs describe them. Pure Python."""

from types import SimpleNamespace
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel


def output(description: str, *, jobs: bool = False, only_with: str | None = None) -> Any:
    """One output. `jobs`: the job tools refuse a stack without it (so it has no default);
    `only_with`: exported only when that setting is set, else absent."""
    extra = {"x-required-by-jobs": jobs, "x-only-with": only_with}
    return Field(
        ... if jobs else None,
        description=description,
        json_schema_extra={k: v for k, v in extra.items() if v},
    )


class StackOutputs(BaseModel):
    """`pulumi stack output --json` of a stack: one field per output, keyed by its camelCase."""

    model_config = ConfigDict(alias_generator=to_camel, frozen=True, extra="ignore")

    resource_group_name: str = output("resource group of the platform", jobs=True)
    data_resource_group_name: str | None = output("resource group of the data accounts (protected)")
    location: str | None = output("the region")
    subscription_id: str = output("the subscription deployed to", jobs=True)
    workspace_name: str = output("the Azure ML workspace jobs are submitted to", jobs=True)
    cluster_name: str = output("the AmlCompute cluster jobs run on", jobs=True)
    cluster_vm_size: str = output(
        "its VM size; GPUs per node and InfiniBand come from infra/vm_sizes.yaml", jobs=True
    )
    cluster_max_nodes: int = output(
        "the cluster's `cluster.maxNodes`; `azdl submit --nodes` is checked by it", jobs=True
    )
    gpus_per_node: int | None = output("MPI processes per node (one per GPU)")
    infiniband: bool | None = output("whether the nodes have InfiniBand (NCCL transport settings)")
    cluster_identity_client_id: str = output(
        "client id of the cluster's identity (identity-based data access)", jobs=True
    )
    registry_login_server: str | None = output("the container registry, e.g. `<name>.azurecr.io`")
    data_account_name: str | None = output("premium blob account of the training data")
    data_account_url: str | None = output("its blob endpoint (what `azdl data stage` uploads to)")
    data_container_name: str | None = output("container of the training shards")
    data_container_url: str | None = output("its URL")
    outputs_account_name: str | None = output(
        "standard account for checkpoints, logs and TensorBoard"
    )
    outputs_account_url: str | None = output("its blob endpoint")
    outputs_container_name: str | None = output("the outputs container")
    # "" reads as no share, as null does.
    nfs_mount_target: Annotated[str | None, BeforeValidator(lambda v: v or None)] = output(
        "`<account>.file.core.windows.net:/<account>/<share>`; null without a share"
    )
    # `azdl submit --requirements` reads it to refuse installs from PyPI that would fail.
    training_outbound: str | None = output(
        "`network.outbound` (`restricted` or `open`); null with `network.existing`. "
        "`azdl submit --requirements` without `--wheels` is refused on `restricted`"
    )
    # What jobs name their data input and outputs by (azureml://datastores/<name>/paths/…).
    data_datastore: str = output(
        "Azure ML datastore over the data container (job inputs address it)", jobs=True
    )
    outputs_datastore: str = output("Azure ML datastore over the outputs container", jobs=True)
    # For `az network bastion ssh` (docs/access.md).
    bastion_name: str | None = output("the Azure Bastion host", only_with="access.jumpHost")
    jump_host_id: str | None = output(
        "resource id of the jump host VM", only_with="access.jumpHost"
    )
    images: dict[str, str] | None = output("framework → image ref with digest")
    environments: dict[str, str] = output(
        "framework → Azure ML environment id of its image", jobs=True
    )


FIELDS = StackOutputs.model_fields
KEYS = SimpleNamespace(**{name: field.alias for name, field in FIELDS.items()})  # KEYS.location
DESCRIPTIONS = {field.alias: field.description for field in FIELDS.values()}
REQUIRED_BY_JOBS = tuple(
    f.alias for f in FIELDS.values() if f.json_schema_extra.get("x-required-by-jobs")
)
ONLY_WITH = {
    f.alias: f.json_schema_extra["x-only-with"]
    for f in FIELDS.values()
    if "x-only-with" in f.json_schema_extra
}


def exported(**values: Any) -> dict[str, Any]:
    """The outputs to export, by key, in declaration order: one value per field (by its
    name; Pulumi inputs in the program), except that an `only_with` one may be left out."""
    unknown = sorted(set(values) - set(FIELDS))
    missing = [n for n in FIELDS if n not in values and FIELDS[n].alias not in ONLY_WITH]
    if unknown or missing:
        raise TypeError(f"stack outputs: unknown {unknown}, missing {missing} (infra/exports.py)")
    return {FIELDS[n].alias: values[n] for n in FIELDS if n in values}
