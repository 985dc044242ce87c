"""`azdl submit` tags a built-in flavour's job with the images/s `azdl estimate` predicts for its
VM size, node count and model, and where the figure comes from (`azdl jobs watch` sets the
measured pace against it); a user's script, or a model the estimate has no figure for, gets no
such tag. Read back with azure-ai-ml's own loader, as `az ml job create -f` reads the job."""

import pytest
from azure.ai.ml import load_job

from azdl.cli import main
from azdl.estimate.job_tags import BASIS_TAG, IMAGES_TAG
from azdl.estimate.throughput import Inputs, read_project_gpu_kit, read_published, throughput
from azdl.estimate.workload import MODELS
from azdl.jobs.script_job import SCRIPT_TAG
from infra.catalogue import get_vm_size

H100 = "Standard_ND96isr_H100_v5"


def exported(outputs_file, tmp_path, *options, nodes=2):
    out = tmp_path / "job.yml"
    argv = ["submit", "--outputs", str(outputs_file(vm_size=H100)), "--nodes", str(nodes),
            "--storage", "synthetic", "--export", str(out), *options]  # fmt: skip
    assert main(argv) == 0
    return load_job(out)


@pytest.mark.parametrize("nodes", [1, 2])  # a published figure; the model from it
def test_a_builtin_job_carries_the_estimates_figure_for_its_cluster(
    ml_client, outputs_file, tmp_path, nodes
):
    job = exported(outputs_file, tmp_path, nodes=nodes)
    inputs = Inputs(published=read_published())  # what `azdl estimate` reads by default
    read_project_gpu_kit(inputs)
    rate = throughput(get_vm_size(H100), nodes, MODELS["resnet50"], inputs)
    assert rate.images_per_sec is not None
    assert float(job.tags[IMAGES_TAG]) == pytest.approx(rate.images_per_sec, abs=0.05)
    assert job.tags[BASIS_TAG] == rate.short
    ml_client.assert_not_called()


def test_a_model_the_estimate_has_no_figure_for_gets_no_tag(ml_client, outputs_file, tmp_path):
    job = exported(outputs_file, tmp_path, "--framework", "torch", "--", "--model", "tiny")
    assert IMAGES_TAG not in job.tags and BASIS_TAG not in job.tags


def test_a_users_script_gets_no_tag(ml_client, outputs_file, tmp_path):
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text("import torch\n")
    job = exported(outputs_file, tmp_path, "--script", str(tmp_path / "code" / "train.py"))
    assert job.tags[SCRIPT_TAG] == "train.py"
    assert IMAGES_TAG not in job.tags and BASIS_TAG not in job.tags
