"""The local launcher: N workers on this machine, in the training environment, for a built-in
training script or a user's own: Horovod's (transport gloo: `horovodrun --gloo`; mpi: plain
`mpirun`, as Azure ML starts MPI jobs), or torch.distributed's under torchrun."""

import os
import shutil
import subprocess
from pathlib import Path

from azdl import workers
from azdl.envs import training_bin, training_env, work_dir
from azdl.errors import AzdlError
from azdl.jobs import safeguards
from azdl.jobs import script as own_script
from azdl.launchers import (
    DEFAULT_TRANSPORT,
    LAUNCHERS,
    TORCHRUN_ENV,
    TRANSPORTS,
    labelled,
    local_horovodrun,
    local_torchrun,
)
from azdl.paths import folder_or_nothing
from training import flight_recorder
from training.flavours import FLAVOURS, FRAMEWORKS, entry_module, runs_under

# Horovod's background thread coordinates the workers every HOROVOD_CYCLE_TIME ms (default 1).
# With one CPU core per worker that thread takes its time from the training step: P2 measured
# 2 workers vs 1 at 0.69 with the default and 0.84 with 20 ms (README, Train). GPU clusters
# keep Horovod's default; a value already in the environment wins.
LOCAL_CYCLE_TIME_MS = "20"


def local_env(launcher: str = "horovod", workers: int = 1) -> dict[str, str]:
    """Environment for local workers: the training venv (TensorFlow's C++ start-up lines
    quietened, see `azdl.envs`) and the CPU-friendly Horovod cycle time (unless set). Under
    torchrun, each worker's share of the cores as OMP_NUM_THREADS unless set (torchrun would
    set 1 and say so: torch/distributed/run.py)."""
    env = training_env()
    env.setdefault("HOROVOD_CYCLE_TIME", LOCAL_CYCLE_TIME_MS)
    if launcher == "torchrun":
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
        env |= TORCHRUN_ENV
    return env


def check_training_options(
    framework: str, options: list[str], worker_count: int, command: str = "azdl train"
) -> None:
    """Parse the options with the built-in script's own parser (its usage and `error:` line on
    a bad one, exit 2; its help, once, for --help) and check the data folder, before any worker
    starts."""
    from training.data.shards import list_shards, shards_for_rank
    from training.errors import TrainingError
    from training.options import build_parser, check_combinations

    parser = build_parser(framework)
    parser.prog = f"{command} --framework {framework} --"
    parser.usage = f"{command} [--framework {framework}] [options] -- [training options]"
    parsed = parser.parse_args(options)
    if problem := check_combinations(framework, parsed):
        parser.error(problem)
    if parsed.data_dir is not None:
        try:  # relative to the project's folder, where the workers start
            shards_for_rank(list_shards(work_dir() / parsed.data_dir, "train"), 0, worker_count)
        except TrainingError as exc:
            raise AzdlError(f"--data-dir: {exc}") from None


def check_launcher(framework: str, launcher: str, script: bool = False) -> None:
    """The launcher exists and, for a built-in script, can start its flavour's workers."""
    if launcher not in LAUNCHERS:
        raise AzdlError(f"unknown launcher {launcher!r}; allowed: {', '.join(LAUNCHERS)}")
    if not script and framework in FRAMEWORKS and not runs_under(framework, launcher):
        can = [f.name for f in FLAVOURS.values() if runs_under(f.name, launcher)]
        raise AzdlError(
            f"the {framework} flavour runs under Horovod only (training/flavours.py); "
            f"--launcher {launcher} runs --framework {' or '.join(can)}, or your own --script"
        )


def launch_command(
    framework: str,
    workers: int,
    launcher: str,
    script_args: list[str],
    script: Path | None = None,
    exports: tuple[str, ...] = (),
    guard: list[str] | None = None,
    max_restarts: int = 0,
    transport: str = DEFAULT_TRANSPORT,
) -> list[str]:
    """The command line that starts `workers` processes of the framework's training script, or
    of `script` (a user's own file) when given. `exports`: more environment variables mpirun
    must hand to the workers (horovodrun --gloo and torchrun hand over the whole environment).
    `guard`: a prefix each worker's command runs under (safeguards.guard_command).
    `max_restarts`: torchrun restarts every worker this many times after a failure.
    `transport`: Horovod's, gloo or mpi."""
    if workers < 1:
        raise AzdlError(f"--workers must be at least 1, got {workers}")
    if script is not None:
        worker = [str(training_bin("python")), str(script), *script_args]
    elif framework not in FRAMEWORKS:
        allowed = ", ".join(sorted(FRAMEWORKS))
        raise AzdlError(f"unknown framework {framework!r}; allowed: {allowed}")
    else:
        worker = [str(training_bin("python")), "-m", entry_module(framework), *script_args]
    check_launcher(framework, launcher, script is not None)
    if max_restarts and launcher != "torchrun":
        raise AzdlError(
            "--max-restarts is torchrun's: Horovod restarts no workers (use --launcher torchrun)"
        )
    worker = [*(guard or []), *worker]
    if launcher == "torchrun":
        python = str(training_bin("python"))
        return [*local_torchrun(python, workers, max_restarts), *labelled(python), *worker]
    if transport not in TRANSPORTS:
        raise AzdlError(f"unknown transport {transport!r}; allowed: {', '.join(TRANSPORTS)}")
    if transport == "gloo":
        return [*local_horovodrun(str(training_bin("python")), workers), *worker]
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise AzdlError("--transport mpi needs Open MPI's mpirun (make setup-training installs it)")
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    # More workers than cores is fine for a local try-out; Open MPI refuses it by default.
    oversubscribe = ["--oversubscribe"] if workers > (os.cpu_count() or 1) else []
    return [
        mpirun, *root, *oversubscribe, "-np", str(workers), "--bind-to", "none",
        "--map-by", "slot", "-x", "PYTHONPATH", "-x", "PATH", "-x", "TF_CPP_MIN_LOG_LEVEL",
        "-x", "HOROVOD_CYCLE_TIME", *(x for name in exports for x in ("-x", name)),
        *worker,
    ]  # fmt: skip


def script_run(
    script: Path, workers: int, data: str | None, script_args: list[str], run_dir: Path
) -> tuple[list[str], dict[str, str]]:
    """(arguments, environment additions) for a user script: its folders under `run_dir`
    (created), the data folder if given, each worker's share of the cores."""
    folders: dict[str, str | None] = {"data_dir": None}
    if data is not None:
        data_dir = folder_or_nothing(Path(data).expanduser().resolve(), "--data", "the data folder")
        if not data_dir.is_dir():
            raise AzdlError(f"--data {data}: no such folder")
        folders["data_dir"] = str(data_dir)
    made = {"checkpoint_dir": "checkpoints", "log_dir": "logs", "output_dir": "outputs"}
    folders |= {name: str(run_dir / sub) for name, sub in made.items()}
    args = own_script.substitute(script_args, folders)  # a bad placeholder fails before mkdir
    for name in made:
        Path(folders[name]).mkdir(parents=True, exist_ok=True)
    threads = str(max(1, (os.cpu_count() or 1) // workers))
    env = own_script.folder_environment(folders) | {own_script.THREADS_ENV: threads}
    # PyTorch and TensorFlow size their CPU thread pools by OMP_NUM_THREADS (unless set).
    env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", threads)
    return args, env


def stall_guard(
    stall_timeout: int | None,
    launcher: str,
    run_dir: Path,
    progress_timeout: int | None = None,
) -> tuple[list[str] | None, dict]:
    """(the guard prefix, the environment) for --stall-timeout and --progress-timeout (the
    guard's step watchdog), else none. Horovod: its stall inspector. torchrun: the collective
    timeout and the flight recorder, dumped under `run_dir`/flight-recorder, ranks named from
    `run_dir`/ranks (`hang_report` reads both)."""
    if stall_timeout is None and progress_timeout is None:
        return None, {}
    prefix = safeguards.guard_command(
        str(run_dir / "ranks"),
        progress_timeout=progress_timeout,
        python=str(training_bin("python")),
    )
    if stall_timeout is None:
        return prefix, {}
    if launcher != "torchrun":
        return prefix, safeguards.stall_environment(stall_timeout)
    dumps = run_dir / "flight-recorder"
    dumps.mkdir(parents=True, exist_ok=True)  # PyTorch's dump writer makes no folders
    return prefix, safeguards.collective_environment(stall_timeout, str(dumps))


def hang_report(env: dict[str, str], workers: int, run_dir: Path) -> list[str]:
    """After a failed torchrun run with --stall-timeout: the ranks the flight recorder names."""
    prefix = env.get(flight_recorder.DUMP_PREFIX_ENV)
    if prefix is None:
        return []
    return flight_recorder.report(prefix, workers, run_dir / "ranks")


def mlflow_environment(run_dir: Path) -> dict[str, str]:
    """Where rank 0 logs its metrics: MLFLOW_TRACKING_URI if set, else the run folder's store."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return {}
    run_dir.mkdir(parents=True, exist_ok=True)
    return {"MLFLOW_TRACKING_URI": safeguards.local_mlflow_uri(run_dir)}


def start(
    cmd: list[str],
    launcher: str,
    env: dict[str, str],
    cwd: Path | None = None,
    transport: str = DEFAULT_TRANSPORT,
) -> int:
    """Under horovodrun --gloo and torchrun, the launcher's own traceback after a failed worker
    becomes one line (`azdl.workers`); plain mpirun's output is left as it is."""
    if launcher == "torchrun" or transport == "gloo":
        return workers.run(cmd, env, cwd)
    return subprocess.call(cmd, env=env, cwd=cwd)
