"""The health gate on the job's nodes: `python -m training.health.gate ...` in every MPI process
before training (the job's command runs it first, then training only if it exits 0). Each
node's GPUs (count, ECC, pending row remaps), its all_reduce_perf figure and, where the size has
a level, a GPUDirect RDMA loopback per InfiniBand HCA are checked; with --across-nodes, the MPI
figure across nodes. Every tool runs under a timeout. Lines start with `azdl-health:`; below the
failure level it exits 1, naming the node.
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

from training.health import ib_write_bw, nccl_tests, nvidia_smi

PREFIX = "azdl-health:"
# nccl-tests as the GPU images build it (images/*/Dockerfile): the threads build for one node,
# the MPI build (`_mpi` suffix, nccl-tests' NAME_SUFFIX) across nodes.
BIN_DIR = "/opt/nccl-tests/bin"
# perftest, built with CUDA in the images (training/install/image-steps.sh `perftest`).
PERFTEST_DIR = "/opt/perftest/bin"
# Every tool runs under a timeout: a hung GPU or fabric ends the gate, not the job's time limit.
NVIDIA_SMI_TIMEOUT_S = 60
ALL_REDUCE_TIMEOUT_S = 600  # one all_reduce_perf run (16 GiB x 25 iterations is seconds)
IB_WRITE_TIMEOUT_S = 120  # one HCA's loopback
SERVER_START_S = 5  # azure_ib_write_bw_gdr.nhc waits this long for the server to listen
TIMED_OUT = 124  # the exit status `timeout` uses, for a tool stopped at its timeout
REPEATS = 3  # all_reduce_perf runs at most (NHC's REPEATS)
HCAS = 8  # InfiniBand HCAs of the largest sizes (infra/vm_sizes.yaml)
# A command, the folder to put first on its library path, its timeout, and a server command to
# start first (ib_write_bw's loopback) -> (exit status, the client's stdout and stderr).
Runner = Callable[..., tuple[int, str]]


def run_command(command: list[str], library_dir: str | None = None,
                timeout: float = NVIDIA_SMI_TIMEOUT_S,
                server: list[str] | None = None) -> tuple[int, str]:  # fmt: skip
    """Run a tool, stopped after `timeout` seconds (exit status TIMED_OUT). nccl-tests'
    binaries find the NCCL beside them through LD_LIBRARY_PATH, set for their own process only:
    the training keeps the NCCL its framework brings."""
    env = None
    if library_dir is not None:
        env = os.environ | {"LD_LIBRARY_PATH": ":".join(
            p for p in (library_dir, os.environ.get("LD_LIBRARY_PATH")) if p)}  # fmt: skip
    background = None
    try:
        if server is not None:
            background = subprocess.Popen(server, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
            time.sleep(SERVER_START_S)
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=env,
                              timeout=timeout)  # fmt: skip
    except FileNotFoundError as exc:
        return 127, f"{exc.filename or command[0]}: not found in this image"
    except subprocess.TimeoutExpired as exc:
        partial = (exc.stdout or "") + (exc.stderr or "")
        partial = partial.decode(errors="replace") if isinstance(partial, bytes) else partial
        return TIMED_OUT, f"{partial}{command[0]}: no result after {timeout:g} s (stopped)"
    finally:
        if background is not None:
            try:
                background.wait(timeout=SERVER_START_S)
            except subprocess.TimeoutExpired:
                background.kill()
                background.wait()
    return done.returncode, done.stdout + done.stderr


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m training.health.gate", description=__doc__)
    p.add_argument("--gpus", type=int, required=True, help="GPUs per node, as the VM size says")
    p.add_argument("--nodes", type=int, required=True, help="nodes in the job")
    p.add_argument("--bytes", type=int, required=True, help="all-reduce message size in bytes")
    p.add_argument("--out", type=Path, required=True, help="folder for health/*.json")
    p.add_argument("--bin-dir", default=BIN_DIR, help=f"nccl-tests binaries (default {BIN_DIR})")
    p.add_argument("--perftest-dir", default=PERFTEST_DIR,
                   help=f"perftest binaries (default {PERFTEST_DIR})")  # fmt: skip
    p.add_argument("--iters", type=int, default=20, help="all_reduce_perf iterations (-n)")
    p.add_argument("--warmup", type=int, default=5, help="all_reduce_perf warm-up iterations")
    p.add_argument(
        "--repeats",
        type=int,
        default=REPEATS,
        help="all_reduce_perf runs at most, the best judged (NHC's REPEATS)",
    )
    p.add_argument(
        "--ib-write-gbps",
        type=float,
        help="GPUDirect RDMA loopback level per InfiniBand HCA, Gb/s (off if not given)",
    )
    p.add_argument("--hcas", type=int, help="InfiniBand HCAs the VM size has")
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
    """GPU checks, the node's own all-reduce and its InfiniBand loopbacks; the node's report
    (status pass|warn|fail)."""
    report: dict = {"host": host, "messages": []}

    def failed(*messages: str) -> dict:
        return report | {"status": "fail", "messages": [("fail", f"{host}: {m}") for m in messages]}

    code, text = run(list(nvidia_smi.COMMAND), None, NVIDIA_SMI_TIMEOUT_S)
    if code != 0:
        return failed(f"nvidia-smi failed (exit {code}): {text.strip()}")
    try:
        gpus = nvidia_smi.parse(text)
    except ValueError as exc:
        return failed(str(exc))
    report["gpus"] = [gpu.__dict__ for gpu in gpus]
    if found := nvidia_smi.problems(gpus, args.gpus):
        return failed(*found)
    code, text = run(list(nvidia_smi.REMAP_COMMAND), None, NVIDIA_SMI_TIMEOUT_S)
    if code != 0:
        return failed(f"nvidia-smi's row-remapper query failed (exit {code}): {text.strip()}")
    try:
        remaps = nvidia_smi.parse_remaps(text)
    except ValueError as exc:
        return failed(str(exc))
    report["row_remaps"] = [gpu.__dict__ for gpu in remaps]
    if found := nvidia_smi.remap_problems(remaps):
        return failed(*found)
    command = [f"{args.bin_dir}/all_reduce_perf", *_sizes(args), "-g", str(args.gpus)]
    report |= judged(run, command, args, "single", host)
    if report["status"] == "fail" or args.ib_write_gbps is None:
        return report
    return check_infiniband(args, host, run, report)


def check_infiniband(args: argparse.Namespace, host: str, run: Runner, report: dict) -> dict:
    """A GPUDirect RDMA loopback per InfiniBand HCA (ib_write_bw.py: Azure's test and level)."""
    hcas = ib_write_bw.devices()
    results: dict[str, float | None] = {}
    messages = list(report["messages"])
    status = report["status"]
    if args.hcas is not None and len(hcas) != args.hcas:
        listed = ", ".join(hcas) or "none"
        messages.append(
            ("fail", f"{host}: {len(hcas)} InfiniBand HCAs ({listed}), the VM size has {args.hcas}")
        )
        status = "fail"
    for gpu, hca in enumerate(hcas):
        port = ib_write_bw.BASE_PORT + gpu
        server = ib_write_bw.command(args.perftest_dir, hca, gpu, port)
        client = ib_write_bw.command(args.perftest_dir, hca, gpu, port, host)
        code, text = run(client, None, IB_WRITE_TIMEOUT_S, server=server)
        try:
            gbps = ib_write_bw.parse(text)
        except ValueError as exc:
            tail = "\n".join(text.strip().splitlines()[-3:])
            messages.append(("fail", f"{host}: {hca} (GPU {gpu}): {exc}; exit {code}; last "
                             f"lines:\n{tail}"))  # fmt: skip
            results[hca], status = None, "fail"
            continue
        results[hca] = gbps
        if gbps < args.ib_write_gbps:
            why = f"below the failure level {args.ib_write_gbps:g}"
            messages.append(
                ("fail", f"{host}: {hca} (GPU {gpu}): GPUDirect RDMA loopback {gbps:g} Gb/s, {why}")
            )
            status = "fail"
    if status != "fail":
        low = min((v for v in results.values() if v is not None), default=None)
        messages.append(("pass", f"{host}: GPUDirect RDMA loopback on {len(results)} HCAs, "
                         f"lowest {low:g} Gb/s (level {args.ib_write_gbps:g})"))  # fmt: skip
    return report | {"status": status, "messages": messages, "ib_write_bw_gbps": results}


def check_fabric(args: argparse.Namespace, run: Runner) -> dict:
    """This rank's part of the all-reduce across all nodes; the report is rank 0's."""
    command = [f"{args.bin_dir}/all_reduce_perf_mpi", *_sizes(args), "-g", "1"]
    return judged(run, command, args, "multi", f"{args.nodes} nodes")


def _sizes(args: argparse.Namespace) -> list[str]:
    """One message size, `--iters` timed iterations after `--warmup`, values checked."""
    size = str(args.bytes)
    return ["-b", size, "-e", size, "-f", "2", "-n", str(args.iters), "-w", str(args.warmup),
            "-c", "1"]  # fmt: skip


def judged(run: Runner, command, args: argparse.Namespace, scope: str, where: str) -> dict:
    """Up to `--repeats` runs; the best one judged against the scope's levels (as NHC's
    check_nccl_allreduce passes a node when one of its REPEATS runs reaches the level). The
    MPI run across nodes runs once: every rank must run it the same number of times."""
    warn, fail, expected = (getattr(args, f"{scope}_{level}") for level in
                            ("warn", "fail", "expected"))  # fmt: skip
    good_enough = warn if warn is not None else fail
    repeats = args.repeats if scope == "single" else 1
    best, runs = None, 0
    while runs < repeats:
        runs += 1
        code, text = run(command, str(Path(command[0]).parent), ALL_REDUCE_TIMEOUT_S)
        try:
            result = nccl_tests.parse(text)
        except ValueError as exc:
            tail = "\n".join(text.strip().splitlines()[-5:])
            why = f"{where}: {exc}; exit {code}; last lines:\n{tail}"
            return {"status": "fail", "messages": [("fail", why)]}
        if code != 0:
            return {"status": "fail",
                    "messages": [("fail", f"{where}: all_reduce_perf exited {code}")]}  # fmt: skip
        if best is None or result.avg_busbw_gbps > best.avg_busbw_gbps:
            best = result
        if result.wrong_values or good_enough is None or best.avg_busbw_gbps >= good_enough:
            break
    verdict = nccl_tests.judge(best, warn, fail, expected, where)
    message = verdict.message
    if runs > 1:
        message += f" (best of {runs} runs)"
    if best.hosts and where != best.hosts[0] and len(best.hosts) > 1:
        message += f" (hosts {', '.join(best.hosts)})"
    return {"status": verdict.status, "messages": [(verdict.status, message)],
            "all_reduce": best.__dict__ | {"hosts": list(best.hosts)}}  # fmt: skip


def _rank(name: str) -> int:
    return int(os.environ.get(f"OMPI_COMM_WORLD_{name}", "0"))


def checks_s(repeats: int, hcas: int | None, infiniband: bool) -> float:
    """How long local rank 0's checks may take at most: its tools' timeouts added up (two
    nvidia-smi queries, `repeats` all_reduce_perf runs, a loopback per HCA with its server's
    start and wait)."""
    ib = (hcas or HCAS) * (IB_WRITE_TIMEOUT_S + 2 * SERVER_START_S) if infiniband else 0
    return 2 * NVIDIA_SMI_TIMEOUT_S + repeats * ALL_REDUCE_TIMEOUT_S + ib


# The gate on one node at its longest, with the defaults and every check on.
WORST_CASE_S = checks_s(REPEATS, HCAS, infiniband=True)


def node_timeout(args: argparse.Namespace) -> float:
    """How long the node's other ranks wait for local rank 0's verdict."""
    return checks_s(args.repeats, args.hcas, bool(args.ib_write_gbps)) + 60


def wait_for(path: Path, timeout: float, sleep: Callable[[float], None] = time.sleep,
             clock: Callable[[], float] = time.monotonic) -> str:  # fmt: skip
    """The node's verdict from local rank 0's marker, or "fail" after `timeout` seconds."""
    deadline = clock() + timeout
    while not path.exists():
        if clock() >= deadline:
            log("fail", f"no verdict from this node's local rank 0 after {timeout:g} s")
            return "fail"
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
            for level, message in report["messages"]:
                log(level, message)
            if "all_reduce" in report:
                log_metrics({metric_name(host): report["all_reduce"]["avg_busbw_gbps"]})
            status = report["status"]
        finally:
            marker.write_text(status)
    else:
        status = wait_for(marker, node_timeout(args))
    if status == "fail":
        if local_rank == 0:
            log(
                "fail",
                f"node {host} is unhealthy: the job stops before training "
                '(docs/jobs.md, "A bad node": what to do with it)',
            )
        return 1
    if args.nodes < 2 or not args.across_nodes:
        return 0
    report = check_fabric(args, run)
    if rank != 0:  # all_reduce_perf reports on rank 0 only
        return 0
    write(args.out, "multi-node.json", report)
    for level, message in report["messages"]:
        log(level, message)
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
