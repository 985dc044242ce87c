"""The stack outputs are declared once (infra/exports.py): the program exports exactly those keys,
and the CLI parses what `pulumi stack output --json` prints back into the same typed model."""

import json

import pytest

from azdl.errors import AzdlError
from azdl.jobs.stack_outputs import parse_outputs
from infra.config import read_stack_file
from infra.exports import DESCRIPTIONS, FIELDS, ONLY_WITH, exported
from tests.support.renderings import STACKS, prod_with_jump_host


@pytest.mark.slow  # renders a variant of the program (seconds)
def test_a_stack_with_a_jump_host_exports_its_outputs_too():
    outputs = prod_with_jump_host().outputs
    assert set(outputs) == set(DESCRIPTIONS)
    assert set(ONLY_WITH) == {"bastionName", "jumpHostId"}
    prefix = read_stack_file(STACKS / "Pulumi.prod.yaml")["azdl:namePrefix"]
    assert outputs["bastionName"] == f"{prefix}-bastion"
    assert outputs["jumpHostId"].endswith(f"/Microsoft.Compute/virtualMachines/{prefix}-jump-host")


def test_the_program_can_export_no_undeclared_output_and_must_export_every_other():
    every = {name: f"{name}-value" for name in FIELDS}
    assert list(exported(**every)) == list(DESCRIPTIONS)  # keys, in declaration order
    jump_host = {"bastion_name", "jump_host_id"}
    without_jump_host = {k: v for k, v in every.items() if k not in jump_host}
    assert set(exported(**without_jump_host)) == set(DESCRIPTIONS) - set(ONLY_WITH)
    with pytest.raises(TypeError, match=r"unknown \['cluster_nodes'\]"):
        exported(**every, cluster_nodes=2)
    with pytest.raises(TypeError, match=r"missing \['location'\]"):
        exported(**{k: v for k, v in every.items() if k != "location"})


def test_the_cli_reads_the_rendered_outputs_as_the_typed_model(rendering):
    printed = json.loads(json.dumps(rendering.outputs))  # as `pulumi stack output --json`
    outputs = parse_outputs(printed, "rendered stack")
    for name, field in FIELDS.items():
        assert getattr(outputs, name) == printed.get(field.alias), name
    assert isinstance(outputs.cluster_max_nodes, int)
    assert outputs.max_nodes == printed["clusterMaxNodes"] == outputs["clusterMaxNodes"]
    assert outputs.source == "rendered stack" and outputs.values == printed


def test_a_mistyped_output_is_one_clear_error(rendering):
    printed = json.loads(json.dumps(rendering.outputs)) | {"infiniband": "sometimes"}
    with pytest.raises(AzdlError) as info:
        parse_outputs(printed, "outputs.json")
    assert str(info.value).startswith("outputs.json: infiniband = 'sometimes' is invalid: ")
    assert "\n" not in str(info.value)
