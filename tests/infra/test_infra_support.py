"""The pieces around the program: VM catalogue, naming, Pulumi.yaml and the entry point."""

import json
import runpy
from pathlib import Path

import pulumi
import pytest
import yaml

from infra.catalogue import VM_SIZES, get_vm_size
from infra.config import read_stack_file
from infra.naming import derive_names, rule_violation, stable_suffix, with_deployment
from tests.support.mock_engine import PREVIEW_CREATE, AzureMocks

ROOT = Path(__file__).resolve().parents[2]


# ---- catalogue --------------------------------------------------------------------------------


def test_catalogue_has_current_gpu_sizes_and_no_retired_ones():
    for retired in ("Standard_NC24r", "Standard_NC24rs_v3", "Standard_ND24rs"):
        assert retired not in VM_SIZES
    h100 = get_vm_size("Standard_ND96isr_H100_v5")
    assert (h100.gpus, h100.gpu_model, h100.infiniband) == (8, "H100 SXM", True)
    h200 = get_vm_size("Standard_ND96isr_H200_v5")
    assert (h200.gpus, h200.gpu_model, h200.gpu_memory_gib, h200.vcpus, h200.infiniband) == (
        8, "H200 SXM", 141, 96, True)  # fmt: skip
    nvl = get_vm_size("Standard_NC80adis_H100_v5")
    assert (nvl.gpus, nvl.gpu_model, nvl.gpu_memory_gib, nvl.vcpus, nvl.infiniband) == (
        2, "H100 NVL", 94, 80, False)  # fmt: skip
    # CUDA x86-64 images only: no AMD (ROCm) sizes, no Arm-hosted GB200 sizes
    assert not [n for n in VM_SIZES if "MI300X" in n or "GB200" in n]
    assert get_vm_size("Standard_NC24ads_A100_v4").infiniband is False
    assert any(size.gpus == 0 for size in VM_SIZES.values())  # a CPU size for cheap clusters


def test_catalogue_entries_are_consistent():
    for name, size in VM_SIZES.items():
        assert size.name == name and size.vcpus > 0
        if size.gpus:
            assert size.gpu_model and size.gpu_memory_gib > 0, name
        else:
            assert size.gpu_model is None and not size.infiniband, name
        if size.infiniband:
            assert name.startswith("Standard_ND"), name


def test_unknown_size_error_lists_the_known_sizes():
    with pytest.raises(KeyError) as info:
        get_vm_size("Standard_NC24r")
    message = str(info.value)
    assert "unknown VM size 'Standard_NC24r'" in message
    assert all(name in message for name in VM_SIZES)


# ---- naming -----------------------------------------------------------------------------------


SUB_A = "00000000-0000-0000-0000-00000000000a"
SUB_B = "00000000-0000-0000-0000-00000000000b"


def test_suffix_is_stable_and_differs_between_stacks_subscriptions_and_groups():
    def sfx(stack="dev", sub=SUB_A, rg="azdldev-rg"):
        return stable_suffix("azdl", stack, sub, rg)

    assert sfx() == sfx() == sfx(sub=SUB_A.upper(), rg="AZDLDEV-RG")  # ARM ids ignore case
    assert len({sfx(), sfx(stack="prod"), sfx(sub=SUB_B), sfx(rg="other-rg")}) == 4
    names = derive_names("azdl", "dev", "azdldev", "gpu-cluster", SUB_A)
    assert names.data_account == f"azdldevdata{sfx()}" and len(names.data_account) == 17
    assert names.registry == f"azdldevacr{sfx()}"
    # Key Vault and workspace end in the deployment id instead (soft-deleted names)
    deployed = with_deployment(names, "0a1b2c")
    assert (deployed.key_vault, deployed.workspace) == ("azdldev-kv-0a1b2c", "azdldev-mlw-0a1b2c")
    assert deployed.data_account == names.data_account
    with pytest.raises(ValueError, match="6 hex digits"):
        with_deployment(names, "xyz")
    pinned = derive_names("azdl", "dev", "azdldev", "gpu-cluster", SUB_B, "team42")
    assert (pinned.data_account, pinned.outputs_account) == (
        "azdldevdatateam42",
        "azdldevoutteam42",
    )


@pytest.mark.parametrize(
    "kind, name, valid",
    [
        ("storage account", "abc123", True),
        ("storage account", "Abc123", False),
        ("storage account", "a" * 25, False),
        ("key vault", "ab-kv-1", True),
        ("key vault", "ab--kv", False),
        ("key vault", "1abc", False),
        ("compute", "gpu-cluster", True),
        ("compute", "g", False),
        ("compute", "gpu-", False),
        ("container registry", "abcd", False),
        ("container registry", "azdlacr1", True),
    ],
)
def test_naming_rules(kind, name, valid):
    assert (rule_violation(kind, name) is None) is valid


# ---- the Pulumi project and entry point ---------------------------------------------------------


def test_pulumi_project_file():
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == "azdl"
    assert project["runtime"] == {"name": "python", "options": {"virtualenv": ".venv"}}
    assert project["main"] == "infra/"
    assert project["stackConfigDir"] == "stacks"
    assert (ROOT / "infra" / "__main__.py").is_file()


@pytest.mark.slow  # runs the program (seconds)
def test_entry_point_runs_the_program_as_pulumi_does_and_exports_outputs():
    """The Python language host runs `main:` (a folder) with runpy, config from the stack."""
    # as `pulumi preview` of a new stack runs it (infra/mocks, PREVIEW_CREATE)
    mocks = AzureMocks(mode=PREVIEW_CREATE)
    pulumi.runtime.set_mocks(mocks, project="azdl", stack="dev", preview=True)
    config = read_stack_file(ROOT / "stacks" / "Pulumi.dev.yaml")
    pulumi.runtime.set_all_config(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    )
    root = pulumi.runtime.settings.get_root_resource()

    @pulumi.runtime.test
    def run_main():
        runpy.run_path(str(ROOT / "infra"), run_name="__main__")

    run_main()
    assert {"clusterName", "gpusPerNode", "dataContainerUrl", "nfsMountTarget"} <= set(root.outputs)
    assert any(r.type == "azure-native:machinelearningservices:Compute" for r in mocks.resources)
