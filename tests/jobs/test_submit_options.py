"""`azdl submit` options checked before anything is built: --shm-size, and what --dry-run says
its output is."""

import pytest

from azdl.cli import main


@pytest.mark.parametrize("size", ["16GB", "16", "0g", "-1g", "1.5g", "g", "16 g"])
def test_a_shared_memory_size_azure_ml_would_refuse_is_a_clear_error(
    size, ml_client, outputs_file, capsys
):
    with pytest.raises(SystemExit):
        main(["submit", "--outputs", str(outputs_file()), f"--shm-size={size}"])
    err = capsys.readouterr().err
    assert f"--shm-size: '{size}': expected a number above 0 followed by b, k, m or g" in err
    ml_client.assert_not_called()


def test_a_valid_shared_memory_size_reaches_the_job(ml_client, outputs_file):
    assert main(["submit", "--outputs", str(outputs_file()), "--shm-size", "512m"]) == 0
    job = ml_client.return_value.jobs.create_or_update.call_args.args[0]
    assert job.resources.shm_size == "512m"


def test_dry_run_says_its_output_is_built_locally_and_nothing_was_sent(
    ml_client, outputs_file, capsys
):
    assert main(["submit", "--outputs", str(outputs_file()), "--dry-run", "--name", "r1"]) == 0
    ml_client.assert_not_called()
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    assert "Azure ML CLI v2 YAML, built locally; nothing was sent" in header
    assert "compute: azureml:gpu-cluster" in out  # the cluster by name, as the CLI takes it
