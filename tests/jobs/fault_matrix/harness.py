"""The fault matrix's machinery: the command an Azure ML job runs, built by azdl's own
`build_job`, run on this machine as 2 "nodes" for either launcher, with a fault planted, and the
verdict `azdl submit --max-retries` would give (its `follow`, with azure-ai-ml's own job objects
and exception in a mocked workspace, the nodes' output as the job's logs).

What Azure ML does that is done here by hand, as Azure ML's documentation and the job's own
command say: `${{outputs.NAME}}` filled in with a folder; under torchrun one process per node
(`bash -c COMMAND`) with NODE_RANK, MASTER_ADDR and MASTER_PORT (learn.microsoft.com/azure/
machine-learning/how-to-train-distributed-gpu); under MPI one `mpirun` over both nodes'
processes. Each node gets its own host name (a UTS namespace: `unshare --uts`), so that a
verdict that names a node can be checked.

What this machine cannot do, and what stands in for it (nothing else in the command changes):
- GPU sizes: one worker per node (`--nproc-per-node=1`, one MPI process per node), not 8;
  nvidia-smi and all_reduce_perf are scripts printing recorded output in the tools' formats
  (tests/training/stand_ins.py, tests/jobs/data/nccl), named by the gate's own `--bin-dir`;
  the gate's InfiniBand loopback (`--ib-write-gbps`) is left out: there is no HCA to test.
- Gloo finds its peers through the host name, which the namespaces' names do not resolve:
  GLOO_SOCKET_IFNAME=lo.
"""

import contextlib
import io
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from azdl.envs import PACKAGES_ROOT, training_env
from azdl.jobs.request import JobRequest
from azdl.jobs.stack_outputs import parse_outputs
from azdl.runtime import module_command
from tests.support.job_fixtures import stack_outputs
from tests.training import stand_ins
from training import rank_output

CPU_SIZE = "Standard_D4s_v3"
GPU_SIZE = "Standard_ND96isr_H100_v5"  # InfiniBand, the gate on by default, baselines published
NODES = 2
# The tiny model (tests/training/worker_runs.py TINY) for a few steps, one thread per worker.
TRAINING = ("--model", "tiny", "--image-size", "32", "--num-classes", "4", "--warmup-epochs",
            "0", "--batch-size", "4", "--epochs", "1", "--steps-per-epoch", "10",
            "--timing-warmup-steps", "1", "--threads", "1")  # fmt: skip
FAULT_STEP = 4  # the training step at which a planted fault fires
FAULT_MARK = "azdl-matrix: fault at "  # what a fault prints (with the time) when it fires
ROOT_ENV = "AZDL_MATRIX_ROOT"  # the run's folder, for a fault's marker files
NON_ZERO = (  # Azure ML's error for a job whose command failed (test_retry.NON_ZERO's source)
    "AzureMLCompute job failed.\nJobFailed: Submitted script failed with a non-zero exit code; "
    "see the driver log file for details.\n\tReason: Job failed with non-zero exit Code"
)


@dataclass
class Fault:
    """A fault planted in the nodes' processes: Python code run at start-up in every process
    of the job (a sitecustomize module), the nodes' delays, stand-in tools, request options."""

    name: str
    code: str = ""  # sitecustomize: runs in every Python process of both nodes
    vm_size: str = CPU_SIZE
    delays: dict[int, float] = field(default_factory=dict)  # node -> seconds late
    nvidia_smi: dict = field(default_factory=dict)  # stand_ins.nvidia_smi's options
    request: dict = field(default_factory=dict)  # JobRequest options
    training: tuple[str, ...] = ()  # training options after TRAINING's
    env: dict = field(default_factory=dict)  # more environment for both nodes


@dataclass
class Run:
    launcher: str
    codes: list[int]  # each node's exit status (under MPI: mpirun's)
    logs: list[str]  # each node's output, as Azure ML keeps it per process
    started: float
    ended: float
    root: Path

    @property
    def fault_at(self) -> float | None:
        """When the fault fired: the time a planted fault printed, or a stand-in tool wrote."""
        found = [float(m) for log in self.logs for m in re.findall(rf"{FAULT_MARK}([0-9.]+)", log)]
        marks = self.root / stand_ins.FAULT_TIMES
        found += [float(t) for t in marks.read_text().split()] if marks.is_file() else []
        return min(found) if found else None

    def seconds(self) -> float:
        """From the fault (else the start) to the last node's end."""
        return round(self.ended - (self.fault_at or self.started), 1)


def job(fault: Fault, launcher: str, root: Path):
    """The azure-ai-ml job `azdl submit` would send for this fault's request."""
    from azdl.jobs.spec import build_job

    outputs = parse_outputs(stack_outputs(vm_size=fault.vm_size, max_nodes=NODES), "matrix")
    options = {"health_check": False} | fault.request
    if launcher != "torchrun":  # Azure ML's MPI restarts nothing: azdl refuses the option
        options.pop("max_restarts", None)
    request = JobRequest("torch", NODES, "synthetic", "matrix", TRAINING + fault.training,
                         launcher=launcher, **options)  # fmt: skip
    return build_job(outputs, request)


def node_command(job, root: Path, stand_in_bin: Path) -> str:
    """The job's command as each node runs it here (the module docstring says what changes)."""
    command = job.command
    for name in job.outputs:
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        command = command.replace("${{outputs." + name + "}}", str(folder))
    assert "${{" not in command, command
    command = re.sub(r"--nproc-per-node=\d+", "--nproc-per-node=1", command)
    command = re.sub(r" --ib-write-gbps=\S+", "", command)
    gate = shlex.join(module_command("training.health.gate"))
    assert gate in command or "training.health.gate" not in command, command
    return command.replace(f"{gate} ", f"{gate} --bin-dir={stand_in_bin} ")


def sitecustomize(folder: Path, code: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(code)
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(fault: Fault, launcher: str, root: Path, timeout: float = 600) -> Run:
    """The fault's job on 2 "nodes" until every node has ended."""
    root.mkdir(parents=True, exist_ok=True)
    spec = job(fault, launcher, root)
    tools = root / "bin"
    smi = fault.nvidia_smi | ({"after": root / fault.nvidia_smi["after"]}
                              if "after" in fault.nvidia_smi else {})  # fmt: skip
    stand_ins.nvidia_smi(tools, marks=root / stand_ins.FAULT_TIMES, **smi)
    stand_ins.all_reduce_perf(tools)
    command = node_command(spec, root, tools)
    env = training_env({
        **{k: str(v) for k, v in spec.environment_variables.items()},
        "PYTHONPATH": f"{PACKAGES_ROOT}{os.pathsep}{sitecustomize(root / 'fault', fault.code)}",
        "PATH": f"{tools}{os.pathsep}{training_env()['PATH']}",
        "AZUREML_RUN_ID": "matrix", "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
        ROOT_ENV: str(root),
        "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "10",
        **fault.env,
    })  # fmt: skip
    started = time.time()
    if launcher == "torchrun":
        port = str(free_port())
        processes = [
            subprocess.Popen(
                ["unshare", "--uts", "bash", "-c",
                 f"hostname node-{node}; export TMPDIR={root}/tmp-{node}; mkdir -p $TMPDIR; "
                 f"sleep {fault.delays.get(node, 0)}; {command}"],
                cwd=PACKAGES_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                env=env | {"NODE_RANK": str(node), "MASTER_ADDR": "127.0.0.1",
                           "MASTER_PORT": port}, start_new_session=True,
            )
            for node in range(NODES)
        ]  # fmt: skip
    else:  # Azure ML's MPI: one mpirun over the nodes' processes (one per node here, each the
        # first of its node: its local rank 0, its own TMPDIR)
        per_node = (
            f'hostname "node-$OMPI_COMM_WORLD_RANK"; export OMPI_COMM_WORLD_LOCAL_RANK=0 '
            f'TMPDIR="{root}/tmp-$OMPI_COMM_WORLD_RANK"; mkdir -p "$TMPDIR"; {command}'
        )
        processes = [
            subprocess.Popen(
                ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(NODES),
                 "--bind-to", "none", "unshare", "--uts", "bash", "-c", per_node],
                cwd=PACKAGES_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                env=env, start_new_session=True,
            )
        ]  # fmt: skip
    try:
        logs = [p.communicate(timeout=timeout)[0] for p in processes]
    finally:  # whatever is left of a run that did not end (its own session)
        for p in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
    return Run(launcher, [p.returncode for p in processes], logs, started, time.time(), root)


def node_logs(run_: Run) -> dict[str, str]:
    """The run's output as Azure ML's job logs hold it (user_logs/std_log_process_N.txt)."""
    return {f"user_logs/std_log_process_{i}.txt": log for i, log in enumerate(run_.logs)}


def verdict(status: str, error: str, logs: dict[str, str]):
    """The outcome `azdl submit --max-retries` reaches for an attempt that ended so:
    `azdl.jobs.submit.follow` against a workspace whose `jobs.stream` raises azure-ai-ml's
    JobException with Azure ML's error, `jobs.get` returns azure-ai-ml's Job of the REST
    resource, and `jobs.download` writes the logs."""
    from datetime import UTC, datetime
    from types import SimpleNamespace
    from unittest import mock

    from azdl.jobs import submit, workspace
    from tests.azure.rest_jobs import rest_job
    from tests.jobs.failed_jobs import azure_error

    now = datetime.now(UTC)
    client = mock.Mock()
    client.jobs.create_or_update.side_effect = lambda job: SimpleNamespace(
        name=job.name, studio_url="https://ml.azure.com/runs/" + job.name
    )
    client.jobs.stream.side_effect = azure_error(error) if status == "Failed" else None
    client.jobs.get.side_effect = lambda name: rest_job(name, status, now, now)

    def download(name, download_path, **kwargs):
        for path, text in logs.items():
            target = Path(download_path) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)

    client.jobs.download.side_effect = download
    attempts: list = []
    first = SimpleNamespace(name="matrix", tags={})
    quiet = io.StringIO()
    with mock.patch.object(workspace, "wait", lambda c, name: status), \
            contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):  # fmt: skip
        submit.follow(client, lambda *a: first, max_retries=0, attempts=attempts)
    return attempts[0].outcome


def outcome_of(run_: Run):
    status = "Completed" if all(code == 0 for code in run_.codes) else "Failed"
    return status, verdict(status, NON_ZERO, node_logs(run_))


def restarted(run_: Run) -> bool:
    """Whether torchrun started any worker again (a record of a restart round above 0)."""
    from training import exits

    return any(r.round > 0 for r in exits.parse("\n".join(run_.logs)))


def stack_traces(run_: Run) -> list[str]:
    """The lines of a Python traceback or a C++ stack in the nodes' output (a worker's line
    under torchrun labelled with its rank: training.rank_output) up to each node's last exit
    record. After it, a node's torchrun may still log one: the non-host agent shutting
    the rendezvous down after a completed run can find node 0's store already gone (torch 2.13
    dynamic_rendezvous.py `shutdown`: "has failed to shutdown the rendezvous ... due to an
    error of type RendezvousConnectionError", after TCPStore's C++ warning); the run has ended."""
    from training import exits

    pattern = re.compile(
        rf"Traceback \(most recent call last\)|^(?:{rank_output.LABEL})?frame #\d+", re.M
    )
    found = []
    for log in run_.logs:
        end = log.rfind(exits.LINE)
        found += [m.group(0) for m in pattern.finditer(log[: end if end >= 0 else len(log)])]
    return found


def results_header(command: str) -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PACKAGES_ROOT,
                            capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    return {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": f"{os.uname().nodename}, {os.cpu_count()} cores, load "
        f"{os.getloadavg()[0]:.1f} at the end",
        "commit": commit,
        "command": command,
    }


def write_results(path: Path, header: dict, rows: list[dict]) -> None:
    path.write_text(json.dumps({**header, "rows": rows}, indent=2) + "\n")
