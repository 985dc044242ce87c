"""How workers start, one vocabulary for `azdl train`, `submit` and `bench` and
training/flavours.py: Horovod's launcher (horovodrun or mpirun locally, Azure ML's MPI on the
cluster) or torchrun. And torchrun as azdl starts it: on this machine (one node, `azdl train`)
and on each node of an Azure ML job with `distribution: pytorch` (`azdl submit`); the choice of
one torchrun per node is explained in docs/torchrun.md, "On the cluster: one torchrun per node".
No Azure calls."""

import shlex

from azdl.runtime import module_command
from training import job_stop
from training.health import gate

LAUNCHERS = ("horovod", "torchrun")
DEFAULT_LAUNCHER = "horovod"
# Horovod's transport on this machine: `horovodrun --gloo` (the default), or plain `mpirun`, as
# Azure ML starts the processes of an MPI job.
TRANSPORTS = ("gloo", "mpi")
DEFAULT_TRANSPORT = "gloo"

# The rendezvous shares its TCP store server with the workers by default, and that store
# outlives a restart: the restarted workers then read the previous round's Gloo addresses and
# fail to connect ("Gloo connectFullMesh failed ... Connection refused", seen here with
# --max-restarts). Opting out gives every round a fresh store on a free port
# (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py, torch 2.13.0: `use_agent_store`
# and the "opt-out option of TCPStore sharing" in next_rendezvous).
TORCHRUN_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


# How late one node may reach the rendezvous after another, for node 0's store to wait out
# (c10d's read_timeout: a non-host node's store client waits that long for node 0's store, C++
# retries inside, default 60 s; join_timeout: the rendezvous's own deadline, default 600 s;
# torch 2.13 elastic/rendezvous/c10d_rendezvous_backend.py `_create_tcp_store`,
# dynamic_rendezvous.py `create_handler`): what each node runs before its torchrun, at its
# longest, the health gate (training/health/gate.py, its tools' timeouts added up: nvidia-smi
# 2 x 60 s, all_reduce_perf 3 x 600 s, ib_write_bw 8 x (120 + 2 x 5) s) and a script job's pip
# step (azdl/jobs/script_job.py runs it under PIP_TIMEOUT_S).
PIP_TIMEOUT_S = 1200
RENDEZVOUS_TIMEOUT_S = int(gate.WORST_CASE_S) + PIP_TIMEOUT_S
# Set on each node before its torchrun: its own address for the others (training.node_address),
# and the rendezvous's endpoint, which torchrun does not pass on to its workers (training.guard
# closes the rendezvous through it after a stop that every restart would repeat).
NODE_ADDRESS_ENV = "AZDL_NODE_ADDR"
NODE_RANK_MISSING = "not set: Azure ML sets it on every node of a pytorch job"


def labelled(python: str = "python") -> list[str]:
    """The prefix of a torchrun worker's command that keeps each line it writes whole and
    labels it with the worker's global rank, as horovodrun does (`[1]<stdout>:`; why not
    torchrun's own --tee labels: training/rank_output.py)."""
    return [*module_command("training.rank_output", python), "--"]


def local_horovodrun(python: str, workers: int) -> list[str]:
    """horovodrun --gloo for `workers` processes here, its Gloo check read without importing
    TensorFlow (training/horovodrun.py), the worker's command given after it."""
    hosts = f"localhost:{workers}"
    return [
        *module_command("training.horovodrun", python),
        "--gloo",
        "-np",
        str(workers),
        "-H",
        hosts,
    ]


def local_torchrun(python: str, workers: int, max_restarts: int) -> list[str]:
    """torchrun for `workers` processes here, its rendezvous on a free local port (--standalone:
    torchrun's c10d store), the worker's command given after it as is (--no-python)."""
    return [
        python, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
        "--nproc-per-node", str(workers), "--max-restarts", str(max_restarts), "--no-python",
    ]  # fmt: skip


def node_torchrun(nodes: int, per_node: int, max_restarts: int, run_id: str) -> str:
    """The shell words that start torchrun on one node of an Azure ML job of `nodes` nodes
    (process_count_per_instance 1), `per_node` workers each.

    Azure ML sets MASTER_ADDR, MASTER_PORT and NODE_RANK on each node (learn.microsoft.com/
    azure/machine-learning/how-to-train-distributed-gpu, ms.date 2024-01-29; MicrosoftDocs/
    azure-ai-docs commit 28d23b4). The rendezvous is torchrun's fault-tolerant form
    (torch/distributed/run.py, "Fault tolerant": c10d backend, a fixed number of nodes,
    --max-restarts, one --rdzv-id for all nodes): node 0 hosts its store at MASTER_ADDR:
    MASTER_PORT, said explicitly with is_host rather than guessed from host names
    (elastic/rendezvous/c10d_rendezvous_backend.py, `is_host`); a node without NODE_RANK stops
    with one line rather than host a store of its own. The rendezvous waits out
    RENDEZVOUS_TIMEOUT_S of skew between nodes, and each node is reached at its own address.
    torchrun runs under training.job_stop, which ends it when a node writes a stop into the
    job's folder of stops (STOP_DIR_ENV, set by the job).
    """
    conf = (
        f"is_host=$(( ${{NODE_RANK:?{NODE_RANK_MISSING}}} == 0 )),"
        f"read_timeout={RENDEZVOUS_TIMEOUT_S},join_timeout={RENDEZVOUS_TIMEOUT_S}"
    )
    return " ".join([
        f'export {NODE_ADDRESS_ENV}="$({shlex.join(module_command("training.node_address"))})"',
        f'{job_stop.RENDEZVOUS_ENV}="$MASTER_ADDR:$MASTER_PORT" &&',
        shlex.join(module_command("training.job_stop")),
        f'run "${{{job_stop.STOP_DIR_ENV}:?}}" --',
        "torchrun", f"--nnodes={nodes}", f"--nproc-per-node={per_node}",
        "--rdzv-backend=c10d", '--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"',
        f"--rdzv-id={shlex.quote(run_id)}", f'--rdzv-conf="{conf}"',
        f'--local-addr="${{{NODE_ADDRESS_ENV}:?no address of this node}}"',
        f"--max-restarts={max_restarts}", "--no-python",
    ])  # fmt: skip
