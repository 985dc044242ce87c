"""The job of `azdl data fill-nfs`: the staged shards copied from the data container into the
stack's NFS share, by a node of the stack's own cluster."""

import shlex

from azdl.errors import AzdlError
from azdl.jobs.azureml import NFS_MOUNT_POINT, command_job, data_input, nfs_docker_args
from azdl.jobs.stack_outputs import StackOutputs
from azdl.runtime import module_command


def build_fill_nfs_job(
    outputs: StackOutputs, data_path: str, run_id: str, experiment: str = "azdl"
):
    """A one-node, one-process job that copies every shard and the manifest from the data
    container (read-only blob mount) to the NFS share, checked against the manifest's MD5s.

    The premium NFS share can't be written over the storage REST API, so the only way in is
    from a machine in the VNet that mounts it: a node of the stack's own cluster.
    """
    if outputs.nfs_mount_target is None:
        raise AzdlError(
            f"{outputs.source} has no NFS share (nfsMountTarget is null): nothing to fill; "
            "set storage.nfsShareGiB in the stack and deploy it"
        )
    dest = f"{NFS_MOUNT_POINT}/{data_path}".rstrip("/")
    copy = [*module_command("training.data.copy_shards"), "--all", "--source", "${{inputs.data}}"]
    return command_job(
        outputs,
        run_id,
        experiment,
        description=f"azdl: fill the NFS share's {dest} from the data container",
        command=shlex.join([*copy, "--dest", dest]),
        # Any of the stack's images holds training/ (stdlib-only copy step).
        environment=outputs.environment("keras"),
        instance_count=1,
        inputs={"data": data_input(outputs, data_path)},
        docker_args=nfs_docker_args(outputs.nfs_mount_target),
        tags={"azdl.task": "fill-nfs"},
    )
