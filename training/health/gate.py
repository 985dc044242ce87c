"""The health gate on the job's nodes: `python -m training.health.gate ...` in every MPI process
before training (the job's command runs it first, then training only if it exits 0). Each
node's GPUs and its all_reduce_perf figure are checked; with --across-nodes, the MPI figure
across nodes. Lines start with `azdl-health:`; below the failure level it exits 1.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from training.health import nccl_tests, nvidia_smi

PREFIX = "azdl-health:"
# nccl-tests as the GPU images build it (images/*/Dockerfile): the threads build for one node,
# the MPI build (`_mpi` suffix, nccl-tests' NAME_SUFFIX) across nodes.
BIN_DIR = "/opt/nccl-tests/bin"
# A command, and a folder to put first on its library path -> (exit status, stdout and stderr).
Runner = Callable[[list[str], str | None], tuple[int, str]]


def run_command(command: list[str], library_dir: str | None = None) -> tuple[int, str]:
    """Run a tool. nccl-tests' binaries find the NCCL beside them through LD_LIBRARY_PATH, set
    for their own process only: the training keeps the NCCL its framework brings."""
    env = None
    if library_dir is not None:
        env = os.environ | {"LD_LIBRARY_PATH": ":".join(
            p for p in (library_dir, os.environ.get("LD_LIBRARY_PATH")) if p)}  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    except FileNotFoundError:
        return 127, f"{command[0]}: not found in this image"
    return done.returncode, done.stdout + done.stderr


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m training.health.gate", description=__doc__)
    p.add_argument("--gpus", type=int, required=True, help="GPUs per node, as the VM size says")
    p.add_argument("--nodes", type=int, required=True, help="nodes in the job")
    p.add_argument("--bytes", type=int, required=True, help="all-reduce message size in bytes")
    p.add_argument("--out", type=Path, required=True, help="folder for health/*.json")
    p.add_argument("--bin-dir", default=BIN_DIR, help=f"nccl-tests binaries (default {BIN_DIR})")
    p.add_argument(
        "--across-nodes",
        action="store_true",
        help="also the MPI all-reduce across the nodes (only in a job with no other MPI program)",
    )
    for scope in ("single", "multi"):
        for level in ("expected", "warn", "fail"):
            p.add_argument(f"--{scope}-{level}", type=float, help=f"{scope}-node {level} GB/s")
    return p


def log(status: str, message: str) -> None:
    print(f"{PREFIX} {status.upper()} {message}", flush=True)


def log_metrics(metrics: dict[str, float]) -> None:
    """The figures to the job's MLflow run (Azure ML points MLFLOW_TRACKING_URI at it)."""
    if not os.environ.get("MLFLOW_TRACKING_URI"):
        log("note", "MLFLOW_TRACKING_URI is not set: figures are in the JSON files only")
        return
    try:
        import mlflow
    except ImportError:
        log("warn", "mlflow is not installed in this image: figures are in the JSON files only")
        return
    from mlflow.exceptions import MlflowException

    try:
        mlflow.log_metrics(metrics)
    except MlflowException as exc:  # e.g. no plugin for Azure ML's azureml:// tracking URI
        log("warn", f"MLflow did not take the figures ({exc}): they are in the JSON files only")


def metric_name(host: str) -> str:
    return "health/single_node_busbw_gbps/" + "".join(
        c if c.isalnum() or c in "-_." else "_" for c in host
    )


def check_node(args: argparse.Namespace, host: str, run: Runner) -> dict:
    """GPU checks and the node's own all-reduce; the node's report (status pass|warn|fail)."""
    report: dict = {"host": host, "messages": []}
    code, text = run(list(nvidia_smi.COMMAND), None)
    if code != 0:
        return report | {
            "status": "fail",
            "messages": [f"{host}: nvidia-smi failed: {text.strip()}"],
        }
    try:
        gpus = nvidia_smi.parse(text)
    except ValueError as exc:
        return report | {"status": "fail", "messages": [f"{host}: {exc}"]}
    report["gpus"] = [gpu.__dict__ for gpu in gpus]
    found = nvidia_smi.problems(gpus, args.gpus)
    if found:
        return report | {"status": "fail", "messages": [f"{host}: {p}" for p in found]}
    size = str(args.bytes)
    command = [f"{args.bin_dir}/all_reduce_perf", "-b", size, "-e", size, "-f", "2", "-g",
               str(args.gpus), "-c", "1"]  # fmt: skip
    return report | judged(
        run, command, args.single_warn, args.single_fail, args.single_expected, host
    )


def check_fabric(args: argparse.Namespace, run: Runner) -> dict:
    """This rank's part of the all-reduce across all nodes; the report is rank 0's."""
    size = str(args.bytes)
    command = [f"{args.bin_dir}/all_reduce_perf_mpi", "-b", size, "-e", size, "-f", "2", "-g",
               "1", "-c", "1"]  # fmt: skip
    return judged(run, command, args.multi_warn, args.multi_fail, args.multi_expected,
                  f"{args.nodes} nodes")  # fmt: skip


def judged(run: Runner, command, warn, fail, expected, where: str) -> dict:
    code, text = run(command, str(Path(command[0]).parent))
    try:
        result = nccl_tests.parse(text)
    except ValueError as exc:
        tail = "\n".join(text.strip().splitlines()[-5:])
        return {"status": "fail", "messages": [f"{where}: {exc}; exit {code}; last lines:\n{tail}"]}
    if code != 0:
        return {"status": "fail", "messages": [f"{where}: all_reduce_perf exited {code}"]}
    verdict = nccl_tests.judge(result, warn, fail, expected, where)
    if result.hosts and where != result.hosts[0] and len(result.hosts) > 1:
        hosts = ", ".join(result.hosts)
        verdict = nccl_tests.Verdict(verdict.status, f"{verdict.message} (hosts {hosts})")
    return {"status": verdict.status, "messages": [verdict.message],
            "all_reduce": result.__dict__ | {"hosts": list(result.hosts)}}  # fmt: skip


def _rank(name: str) -> int:
    return int(os.environ.get(f"OMPI_COMM_WORLD_{name}", "0"))


def wait_for(path: Path, sleep: Callable[[float], None] = time.sleep) -> str:
    while not path.exists():
        sleep(1.0)
    return path.read_text()


def write(out: Path, name: str, report: dict) -> None:
    folder = out / "health"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(report, indent=2) + "\n")


def main(argv: list[str] | None = None, run: Runner = run_command) -> int:
    args = build_parser().parse_args(argv)
    host = socket.gethostname()
    rank, local_rank = _rank("RANK"), _rank("LOCAL_RANK")
    tmp = os.environ.get("TMPDIR", "/tmp")
    marker = Path(tmp) / f"azdl-health-{os.environ.get('AZUREML_RUN_ID', 'local')}"
    if local_rank == 0:
        status = "fail"
        try:  # the node's other ranks wait for the marker: it is written whatever happens
            report = check_node(args, host, run)
            write(args.out, f"node-{host}.json", report)
            for message in report["messages"]:
                log(report["status"], message)
            if "all_reduce" in report:
                log_metrics({metric_name(host): report["all_reduce"]["avg_busbw_gbps"]})
            status = report["status"]
        finally:
            marker.write_text(status)
    else:
        status = wait_for(marker)
    if status == "fail":
        if local_rank == 0:
            log("fail", f"node {host} is unhealthy: the job stops before training")
        return 1
    if args.nodes < 2 or not args.across_nodes:
        return 0
    report = check_fabric(args, run)
    if rank != 0:  # all_reduce_perf reports on rank 0 only
        return 0
    write(args.out, "multi-node.json", report)
    for message in report["messages"]:
        log(report["status"], message)
    if "all_reduce" in report:
        log_metrics({"health/multi_node_busbw_gbps": report["all_reduce"]["avg_busbw_gbps"]})
    if report["status"] == "fail":
        log(
            "fail",
            "the all-reduce across nodes is below its failure level: the job stops before "
            "training (each node's own figure is above; the fabric figure is one for all nodes)",
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
