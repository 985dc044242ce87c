"""`azdl data fill-nfs`: the one-node job that copies the staged shards into the NFS share."""

from job_commands import runs

from azdl.cli import main
from azdl.jobs.azureml import NFS_MOUNT_POINT


def submitted(ml_client):
    client = ml_client.return_value
    client.jobs.create_or_update.assert_called_once()
    return client.jobs.create_or_update.call_args.args[0]


def test_fill_job_copies_everything_from_the_blob_mount_into_the_share(ml_client, outputs_file):
    path = outputs_file()
    code = main(
        ["data", "fill-nfs", "--outputs", str(path), "--data-path", "/in1k/", "--name", "f1"]
    )
    assert code == 0
    job = submitted(ml_client)
    assert job.name == "f1"
    assert job.command == (
        f"{runs('training.data.copy_shards')} --all --source '${{{{inputs.data}}}}' "
        f"--dest {NFS_MOUNT_POINT}/in1k"
    )
    assert job.inputs["data"].path == "azureml://datastores/azdl_training_data/paths/in1k/"
    assert job.inputs["data"].mode == "ro_mount"
    # One process on one node: --all refuses to run as one of several ranks.
    assert job.resources.instance_count == 1
    assert job.distribution is None
    flag, volume = job.resources.docker_args
    assert flag == "--mount" and f"dst={NFS_MOUNT_POINT}" in volume
    assert "volume-opt=device=:/azdlprodnfs/training-data" in volume
    assert job.identity.client_id == "client-id-1"


def test_fill_needs_a_share_and_never_calls_azure_without_one(ml_client, outputs_file, capsys):
    code = main(["data", "fill-nfs", "--outputs", str(outputs_file(nfs=False))])
    assert code == 2
    assert "has no NFS share (nfsMountTarget is null): nothing to fill" in capsys.readouterr().err
    ml_client.assert_not_called()


def test_fill_dry_run_prints_the_job_only(ml_client, outputs_file, capsys):
    code = main(["data", "fill-nfs", "--outputs", str(outputs_file()), "--dry-run"])
    assert code == 0
    ml_client.assert_not_called()
    out = capsys.readouterr().out
    assert "copy_shards --all" in out
    assert "instance_count: 1" in out
