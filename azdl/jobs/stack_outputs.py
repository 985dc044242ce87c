"""The stack outputs the job tools need, from `pulumi stack output --json` or a saved copy."""

import json
import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

from pydantic import PrivateAttr, ValidationError

from azdl import project
from azdl.errors import AzdlError
from azdl.paths import existing_file
from infra import exports
from infra.catalogue import UnknownVmSize, VmSize, get_vm_size
from infra.exports import KEYS
from training.flavours import FLAVOURS

# The outputs submit and bench need (tests/infra checks that the program exports them all);
# nfsMountTarget is read too, but may be null (a stack without an NFS share).
REQUIRED = exports.REQUIRED_BY_JOBS


class StackOutputs(exports.StackOutputs):
    """A stack's outputs as the job tools read them (`parse_outputs`): the typed fields, where
    they came from (`source`, for messages), the values as given and the cluster's VM size."""

    _source: str = PrivateAttr("")
    _values: dict[str, Any] = PrivateAttr(default_factory=dict)
    _vm_size: VmSize | None = PrivateAttr(None)

    source = property(lambda self: self._source)
    values = property(lambda self: self._values)
    vm_size = property(lambda self: self._vm_size)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    @property
    def max_nodes(self) -> int:
        return self.cluster_max_nodes

    @property
    def internet_denied(self) -> bool:
        """The training subnet denies the internet (`network.outbound: restricted`), as the
        stack says in `trainingOutbound`; False where it does not say (an older stack, or a
        landing zone's subnet, whose NSG the stack does not know)."""
        return self.training_outbound == "restricted"

    def environment(self, framework: str) -> str:
        image = FLAVOURS[framework].image
        env = self.environments.get(image)
        if not env:
            raise AzdlError(
                f"{self.source} has no Azure ML environment for the {image} image "
                f"(outputs.{KEYS.environments}.{image}); run `pulumi up` for the stack first"
            )
        return env


def parse_outputs(values: Any, source: str) -> StackOutputs:
    """Check that `values` has every output the job tools read, and a known VM size."""
    if not isinstance(values, dict):
        raise AzdlError(f"{source}: expected a JSON object of stack outputs")
    missing = [key for key in REQUIRED if values.get(key) in (None, "")]
    if missing:
        raise AzdlError(
            f"{source} lacks the stack outputs {', '.join(missing)}; "
            "is the stack deployed with this version of azdl (`pulumi up`)?"
        )
    nodes = values[KEYS.cluster_max_nodes]  # Pulumi may hand numbers over as floats (2.0)
    whole = isinstance(nodes, int | float) and not isinstance(nodes, bool)
    if not (whole and math.isfinite(nodes) and nodes == int(nodes) and nodes >= 1):
        raise AzdlError(
            f"{source}: {KEYS.cluster_max_nodes} = {nodes!r} is invalid: a whole number of at "
            "least 1"
        )
    try:
        vm_size = get_vm_size(values[KEYS.cluster_vm_size])
    except UnknownVmSize as exc:
        raise AzdlError(f"{source}: {KEYS.cluster_vm_size}: {exc}") from None
    try:
        outputs = StackOutputs.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"])
        raise AzdlError(
            f"{source}: {key} = {error['input']!r} is invalid: {error['msg']}"
        ) from None
    outputs._source, outputs._values, outputs._vm_size = source, dict(values), vm_size
    return outputs


def read_outputs(stack: str | None = None, outputs_file: Path | None = None) -> tuple[dict, str]:
    """(outputs, where they came from): a saved JSON file, else `pulumi stack output --json`.

    Unchecked: each tool checks the outputs it reads (`load_outputs` those of the job tools).
    """
    if outputs_file is not None:
        save = "`pulumi stack output --json --stack STACK > FILE`"
        path = existing_file(outputs_file, "--outputs", f"the file {save} writes",
                             f"no such file (save one with {save})")  # fmt: skip
        try:
            values = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise AzdlError(f"--outputs {path}: not JSON ({exc})") from None
        source = str(path)
    else:
        values, source = _pulumi_outputs(stack), f"stack {stack!r}"
    if not isinstance(values, dict):
        raise AzdlError(f"{source}: expected a JSON object of stack outputs")
    return values, source


def _pulumi_outputs(stack: str | None) -> Any:
    if not stack:
        raise AzdlError("name the stack (--stack dev) or a saved outputs file (--outputs FILE)")
    pulumi = shutil.which("pulumi")
    if pulumi is None:
        raise AzdlError(
            "the Pulumi CLI is not on PATH; pass the stack's outputs as a file instead: "
            f"`pulumi stack output --json --stack {stack} > {stack}.json`, "
            f"then --outputs {stack}.json"
        )
    result = subprocess.run(
        [pulumi, "stack", "output", "--json", "--stack", stack],
        capture_output=True,
        text=True,
        cwd=project.root(),  # where Pulumi.yaml is
    )
    if result.returncode != 0:
        raise AzdlError(f"stack {stack!r}: `pulumi stack output` failed: {result.stderr.strip()}")
    return json.loads(result.stdout)


def load_outputs(stack: str | None = None, outputs_file: Path | None = None) -> StackOutputs:
    """The outputs the job tools need, checked (see `read_outputs` for where they come from)."""
    return parse_outputs(*read_outputs(stack, outputs_file))
