"""What `azdl submit` adds so that a job cannot silently waste GPU hours: the stall inspector,
Azure ML's time limit, the guard with the InfiniBand check, Azure's NCCL topology files."""

import re
from pathlib import Path

import pytest
import yaml
from azure.ai.ml import load_job
from job_commands import after_events, runs

from azdl.cli import main
from azdl.jobs.request import JobRequest
from azdl.jobs.spec import build_job
from infra.catalogue import VM_SIZES
from training import nccl_topology


def submitted(ml_client):
    return ml_client.return_value.jobs.create_or_update.call_args.args[0]


def test_an_infiniband_job_runs_its_training_under_the_guard_with_the_check(outputs):
    job = build_job(
        outputs(vm_size="Standard_ND96isr_H100_v5"), JobRequest("torch", 2, "mount", "r")
    )
    env = job.environment_variables
    assert (env["NCCL_DEBUG"], env["NCCL_DEBUG_SUBSYS"]) == ("INFO", "INIT,NET")
    assert env["HOROVOD_STALL_CHECK_TIME_SECONDS"] == "60"
    assert env["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] == "600"  # the cluster default
    # The HCA count is the catalogue's (8 on ND H100 v5); NCCL's init under a deadline; the
    # built-in script's steps under the watchdog; the node's 8 GPUs checked after a failure.
    assert after_events(job.command).startswith(
        f"{runs('training.guard')} --ranks-dir '${{{{outputs.logs}}}}/ranks' --check-infiniband "
        "--nodes 2 --hcas 8 --nccl-debug WARN --init-deadline 600 --progress-timeout 900 "
        "--first-step-timeout 1800 --post-mortem-gpus 8 -- python -m training.torch.train "
    )
    assert job.limits.timeout == 24 * 3600  # no --timeout, no --max-cost: the default


def test_the_check_is_off_where_there_is_no_infiniband_or_when_asked(outputs):
    nc = build_job(
        outputs(vm_size="Standard_NC96ads_A100_v4"), JobRequest("torch", 1, "mount", "r")
    )
    assert "--check-infiniband" not in nc.command
    # NCCL's set-up is still logged for the guard's init deadline, then back to WARN.
    assert nc.environment_variables["NCCL_DEBUG"] == "INFO"
    assert after_events(nc.command).startswith(
        f"{runs('training.guard')} --ranks-dir '${{{{outputs.logs}}}}/ranks' --nccl-debug WARN "
        "--init-deadline 600 --progress-timeout 900"
    )
    off = JobRequest("torch", 2, "mount", "r", nccl_debug="INFO", infiniband_check=False)
    job = build_job(outputs(vm_size="Standard_ND96isr_H100_v5"), off)
    assert "--check-infiniband" not in job.command
    assert job.environment_variables["NCCL_DEBUG"] == "INFO"
    cpu = build_job(outputs(vm_size="Standard_D4s_v3"), JobRequest("keras", 1, "mount", "r"))
    assert "NCCL_DEBUG" not in cpu.environment_variables
    assert "--init-deadline" not in cpu.command and "--progress-timeout 900" in cpu.command


def test_submit_options_reach_the_job_and_azure_mls_loader_reads_the_time_limit(
    ml_client, outputs_file, tmp_path
):
    out = tmp_path / "job.yml"
    argv = ["submit", "--outputs", str(outputs_file()), "--nodes", "2", "--stall-timeout", "120",
            "--timeout", "7200", "--export", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert yaml.safe_load(out.read_text())["limits"] == {"timeout": 7200}
    job = load_job(out)  # azure-ai-ml's own loader, as `az ml job create -f` reads it
    assert job.limits.timeout == 7200
    assert job.environment_variables["HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"] == "120"
    assert job.environment_variables["HOROVOD_STALL_CHECK_TIME_SECONDS"] == "60"


@pytest.mark.parametrize("bad", ["0", "-5", "ten"])
def test_bad_timeouts_are_refused_before_anything_is_submitted(
    ml_client, outputs_file, capsys, bad
):
    for option in ("--stall-timeout", "--timeout"):
        with pytest.raises(SystemExit) as exc:
            main(["submit", "--outputs", str(outputs_file()), option, bad])
        assert exc.value.code == 2
        assert f"argument {option}: {bad!r}: expected" in capsys.readouterr().err
    ml_client.assert_not_called()


# Azure/azhpc-images components/setup_sku_customizations.sh (commit 8e9d055, 2026-07-29): the VM
# size patterns of its `case` that set up an NCCL topology file, and the file each one links.
AZURE_TOPOLOGY_CASES = {
    "standard_nd*v4": "ndv4-topo.xml",
    "standard_nd96is*_h[1-2]00_v5": "ndv5-topo.xml",
}
# sha256 of topology/ndv4-topo.xml at 4a4565a and topology/ndv5-topo.xml at d21d11e in
# Azure/azhpc-images (measured on the files at those commits): what the image builds check.
AZURE_TOPOLOGY_SHA256 = {
    "ndv4-topo.xml": "c3583efb0b6e53f52410e32643b46bb6af99f5f34dcebc1868c47c233f84d2cf",
    "ndv5-topo.xml": "c26ff47f1decf03d44ee6e90c4a8afd3bddeec334c5545008f33af2a297e2834",
}


def test_topology_files_are_azures_own_for_the_sizes_azure_sets_them_on(outputs):
    assert nccl_topology.FILES == AZURE_TOPOLOGY_CASES
    assert {n: s for n, (_, s) in nccl_topology.SOURCES.items()} == AZURE_TOPOLOGY_SHA256
    root = Path(__file__).resolve().parents[2]
    # Both images run the shared install script's `nccl-topology` step, which downloads and checks
    # the files, then copy its folder into the run stage.
    steps = (root / "training/install/image-steps.sh").read_text()
    for name, (commit, digest) in nccl_topology.SOURCES.items():
        url = nccl_topology.URL.format(commit=commit, name=name)
        assert f"-o /opt/nccl-topology/{name} \\\n        {url}" in steps, name
        assert f'echo "{digest}  /opt/nccl-topology/{name}" | sha256sum -c -' in steps
    for dockerfile in sorted((root / "images").glob("*/Dockerfile")):
        text = dockerfile.read_text()
        assert "image-steps.sh nccl-topology" in text, dockerfile
        assert "COPY --from=build /opt/nccl-topology " + nccl_topology.IMAGE_FOLDER in text
    for size in VM_SIZES.values():
        env = build_job(outputs(vm_size=size.name), JobRequest("torch", 1, "synthetic", "r"))
        topo = env.environment_variables.get("NCCL_TOPO_FILE")
        if size.infiniband and size.gpus:  # every ND size of the catalogue needs one
            name = "ndv5-topo.xml" if re.search(r"_H[12]00_v5$", size.name) else "ndv4-topo.xml"
            assert topo == f"/opt/azdl/nccl-topology/{name}", size.name
            assert env.environment_variables["NCCL_IGNORE_CPU_AFFINITY"] == "1"
        else:
            assert topo is None, size.name
