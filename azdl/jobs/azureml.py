"""What every azdl job shares in Azure ML terms: the command job's common fields, datastore
URIs, one MPI process per GPU, NCCL's settings for the cluster's network, the NFS mount."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the outputs' model is only named here; `azdl submit --help` needs no pydantic
    from azdl.jobs.stack_outputs import StackOutputs

NFS_MOUNT_POINT = "/mnt/azdl-nfs"


def command_job(stack: StackOutputs, run_id: str, experiment: str, /, **fields):
    """azure-ai-ml's command job named `run_id` (also its display name), in `experiment`, on the
    stack's cluster as the cluster's identity; `fields`: the rest of `azure.ai.ml.command`'s.
    Every job has a time limit (`limits.timeout`): `timeout`, else the default of
    azdl.jobs.budget."""
    from azure.ai.ml import command
    from azure.ai.ml.entities import ManagedIdentityConfiguration

    from azdl.jobs.budget import DEFAULT_TIMEOUT_S

    fields["timeout"] = fields.get("timeout") or DEFAULT_TIMEOUT_S
    return command(
        name=run_id,
        display_name=run_id,
        experiment_name=experiment,
        compute=stack["clusterName"],
        identity=ManagedIdentityConfiguration(client_id=stack["clusterIdentityClientId"]),
        **fields,
    )


def datastore_uri(datastore: str, *folders: str) -> str:
    """`azureml://datastores/<datastore>/paths/<folders>/`: a folder in a datastore."""
    path = "".join(f"{part.strip('/')}/" for part in folders if part.strip("/"))
    return f"azureml://datastores/{datastore}/paths/{path}"


def data_input(outputs: StackOutputs, data_path: str):
    """The data container's `data_path` folder, mounted read-only."""
    from azure.ai.ml import Input

    path = datastore_uri(outputs["dataDatastore"], data_path)
    return Input(type="uri_folder", path=path, mode="ro_mount")


def output_folder(outputs: StackOutputs, experiment: str, job: str, name: str):
    """A job output: the folder <experiment>/<job>/<name> of the outputs container, mounted
    read-write."""
    from azure.ai.ml import Output

    path = datastore_uri(outputs["outputsDatastore"], experiment, job, name)
    return Output(type="uri_folder", path=path, mode="rw_mount")


def processes_per_node(outputs: StackOutputs) -> int:
    return outputs.vm_size.gpus or 1


def nccl_environment(outputs: StackOutputs, debug: str) -> dict[str, str]:
    """NCCL settings for the cluster's network; none on CPU sizes (Gloo/MPI over TCP)."""
    size = outputs.vm_size
    if size.gpus == 0:
        return {}
    env = {"NCCL_DEBUG": debug, "NCCL_SOCKET_IFNAME": "eth0"}  # bootstrap over the VNet NIC
    if size.infiniband:
        # InfiniBand sizes: NCCL must use the RDMA fabric across nodes (never disable it: the
        # reference setup did, and its multi-node runs fell back to TCP). Relaxed PCIe ordering
        # is Azure's recommendation for the ND-series HCAs, for NCCL and for UCX (Open MPI).
        env |= {
            "NCCL_IB_DISABLE": "0",
            "NCCL_IB_PCI_RELAXED_ORDERING": "1",
            "UCX_IB_PCI_RELAXED_ORDERING": "on",
        }
    else:
        env["NCCL_IB_DISABLE"] = "1"  # no InfiniBand device: skip probing, use sockets
    return env


def nfs_docker_args(target: str) -> list[str]:
    """`docker run` arguments that mount the NFS 4.1 share at NFS_MOUNT_POINT (Docker's local
    volume driver mounts it on the node; the container needs no extra privileges)."""
    host, _, export = target.partition(":")
    options = f"addr={host},vers=4,minorversion=1,sec=sys"
    volume = (
        f"type=volume,dst={NFS_MOUNT_POINT},volume-driver=local,volume-opt=type=nfs,"
        f'"volume-opt=o={options}",volume-opt=device=:{export}'
    )
    return ["--mount", volume]
