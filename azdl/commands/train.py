"""`azdl train`: N workers on this machine, in the training environment (azdl.local), under
Horovod or torchrun; the ResNet50 demo without script arguments, a user's own script with
--script (docs/architecture.md, "Jobs and the CLI")."""

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from azdl import ledger, local_ledger, project
from azdl.commands.options import (
    LOCAL_RENAMES,
    add_launcher_option,
    add_script_args,
    non_negative_int,
    positive_int,
    script_args,
)
from azdl.envs import training_bin, work_dir
from azdl.errors import AzdlError
from azdl.jobs import safeguards
from azdl.jobs import script as own_script
from azdl.launchers import DEFAULT_LAUNCHER, DEFAULT_TRANSPORT
from azdl.local import (
    check_launcher,
    check_training_options,
    hang_report,
    launch_command,
    local_env,
    mlflow_environment,
    script_run,
    stall_guard,
    start,
)
from azdl.paths import folder_or_nothing
from training.flavours import DEFAULT_FRAMEWORK, FRAMEWORKS

# The demo: ResNet50 small enough for 2 CPU workers to run 20 steps in about a minute.
DEMO_ARGS = [
    "--model", "resnet50", "--image-size", "64", "--num-classes", "10", "--batch-size", "16",
    "--epochs", "2", "--steps-per-epoch", "10", "--warmup-epochs", "1",
    "--timing-warmup-steps", "5",
]  # fmt: skip


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train",
        help="run distributed training locally with N worker processes (Horovod or torchrun)",
        description="Launch N workers on this machine, Horovod's (the default) or, with "
        "--launcher torchrun, torch.distributed's. Arguments after `--` go to the "
        "training script (see `azdl train --framework keras -- --help`); without them, a short "
        "ResNet50 demo on synthetic data runs, checkpointing under runs/. With --script FILE, "
        "your own script runs instead, with AZDL_DATA_DIR, AZDL_CHECKPOINT_DIR, "
        "AZDL_LOG_DIR and AZDL_OUTPUT_DIR set (folders under ./runs/) and {data_dir}, "
        "{checkpoint_dir}, {log_dir}, {output_dir} replaced in its arguments (docs/own-code.md, "
        "docs/torchrun.md).",
    )
    p.add_argument(
        "--framework",
        choices=sorted(FRAMEWORKS),
        help="built-in training script to run (default keras); not with --script",
    )
    p.add_argument(
        "--script",
        type=Path,
        metavar="FILE",
        help="run your own script (`python FILE ARGS` per worker), not a built-in one",
    )
    p.add_argument(
        "--data",
        metavar="DIR",
        help="with --script: the data folder, handed over as AZDL_DATA_DIR and {data_dir}",
    )
    p.add_argument(
        "--run-dir",
        type=Path,
        metavar="DIR",
        help="with --script: the run's folder for checkpoints/, logs/ and outputs/ (default "
        "runs/<script>-<time>); name an earlier run's to resume it",
    )
    p.add_argument(
        "--workers", type=positive_int, default=2, help="number of worker processes (default 2)"
    )
    add_launcher_option(
        p,
        "horovod: Horovod's workers (default); torchrun: torch.distributed's under torchrun "
        "(--framework torch, or your own --script); with --script the default is the one the "
        "script is written for, read from its source",
        LOCAL_RENAMES,
        transport="Horovod's: gloo: under horovodrun --gloo (default); mpi: under plain mpirun, "
        "as Azure ML launches MPI jobs (the default with --stall-timeout)",
    )
    p.add_argument(
        "--stall-timeout",
        type=positive_int,
        metavar="SECONDS",
        help="end the run when some ranks have waited this long for others in a collective, "
        "naming the missing ranks and their host (Horovod's stall inspector, which needs MPI; "
        "under torchrun the collective timeout and PyTorch's flight recorder; "
        "default: off locally, 600 s on the cluster)",
    )
    p.add_argument(
        "--progress-timeout",
        type=positive_int,
        metavar="SECONDS",
        help="end the run when training makes no step for this long, dumping every worker's "
        "Python stacks (the guard's watchdog; the built-in scripts and scripts that call "
        "training.heartbeat.beat; default: off locally, 900 s on the cluster)",
    )
    p.add_argument(
        "--max-restarts",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="with --launcher torchrun: restart every worker after a failure, at most N times; "
        "a built-in script resumes from its last checkpoint (default 0)",
    )
    add_script_args(p)
    p.set_defaults(func=run)


def demo_run_dir(framework: str) -> Path:
    return project.runs_dir() / f"demo-{framework}-{time.strftime('%Y%m%d-%H%M%S')}"


def demo_args(framework: str, workers: int, run_dir: Path | None = None) -> list[str]:
    """The demo's script arguments: a fresh run folder, the CPU cores shared among workers."""
    run_dir = run_dir or demo_run_dir(framework)
    threads = max(1, (os.cpu_count() or 1) // workers)
    return [
        *DEMO_ARGS,
        "--threads", str(threads),
        "--checkpoint-dir", str(run_dir / "checkpoints"),
        "--log-dir", str(run_dir / "tensorboard"),
    ]  # fmt: skip


def launcher_of(args: argparse.Namespace, chosen: str | None = None) -> tuple[str, str]:
    """(launcher, Horovod's transport): `chosen` (for a script: `own_script.launcher_for`),
    else --launcher, else horovod; --transport, else mpi with --stall-timeout (Horovod's stall
    inspector needs it), else gloo."""
    launcher = chosen or args.launcher or DEFAULT_LAUNCHER
    if launcher == "torchrun":
        if args.transport is not None:
            raise AzdlError(
                f"--transport {args.transport} is Horovod's; torchrun starts its workers itself "
                "(leave --transport out)"
            )
        if args.stall_timeout is not None and args.script is not None:
            raise AzdlError(safeguards.SCRIPT_SETS_ITS_TIMEOUT)
        return launcher, DEFAULT_TRANSPORT
    if args.stall_timeout is not None:
        if args.transport == "gloo":
            raise AzdlError(safeguards.GLOO_HAS_NO_STALL_INSPECTOR)
        return launcher, "mpi"
    return launcher, args.transport or DEFAULT_TRANSPORT


def run_launcher(
    cmd: list[str], launcher: str, transport: str, env: dict, run_dir: Path, workers: int,
    events_dir: Path, cwd=None,
):  # fmt: skip
    """Start the workers, their events written to `events_dir`; after a failed torchrun run with
    --stall-timeout, name the ranks the flight recorder shows kept the others waiting; then the
    run's ledger."""
    print("+ " + shlex.join(cmd), file=sys.stderr, flush=True)
    name = env[local_ledger.ATTEMPT_ENV]
    began = ledger.now_ms()
    local_ledger.record_start(events_dir, name, began)
    watch = f"azdl jobs watch --events-dir {shlex.quote(str(events_dir))}"
    print(f"azdl: follow it with `{watch}`", file=sys.stderr, flush=True)
    code = start(cmd, launcher, env, cwd, transport)
    attempt = ledger.Attempt(name, began, ledger.now_ms(), nodes=1, failed=code != 0)
    local_ledger.record_attempt(events_dir, attempt)
    if code != 0 and launcher == "torchrun":
        for line in hang_report(env, workers, run_dir):
            print(f"azdl: {line}", file=sys.stderr, flush=True)
    for line in local_ledger.report(events_dir):
        print(line, file=sys.stderr, flush=True)
    print(f"events and attempts: {events_dir}", file=sys.stderr, flush=True)
    return code


def run(args: argparse.Namespace) -> int:
    user_args = list(script_args(args))
    if args.script is None:
        launcher, transport = launcher_of(args)
        if args.data is not None or args.run_dir is not None:
            raise AzdlError(
                "--data and --run-dir go with --script; built-in scripts take "
                "`-- --data-dir DIR --checkpoint-dir DIR`"
            )
        framework = args.framework or DEFAULT_FRAMEWORK
        check_launcher(framework, launcher, False)  # before the demo's banner
        run_dir = project.runs_dir()  # one MLflow store for runs with their own folders
        events_dir = run_dir / f"{framework}-{time.strftime('%Y%m%d-%H%M%S')}" / "events"
        if user_args:
            check_training_options(framework, user_args, args.workers)
        else:
            run_dir = demo_run_dir(framework)
            events_dir = run_dir / local_ledger.EVENTS_DIR
            user_args = demo_args(framework, args.workers, run_dir)
            print(f"demo: {args.workers} workers, ResNet50 at 64 px on synthetic data", flush=True)
        watched = Path(tempfile.mkdtemp(prefix="azdl-ranks-"))  # ranks/, flight-recorder/
        guard, extra = stall_guard(args.stall_timeout, launcher, watched, args.progress_timeout)
        extra |= mlflow_environment(run_dir) | local_ledger.environment(events_dir)
        cmd = launch_command(
            framework, args.workers, launcher, user_args, exports=tuple(extra), guard=guard,
            max_restarts=args.max_restarts, transport=transport,
        )  # fmt: skip
        env = local_env(launcher, args.workers) | extra
        return run_launcher(
            cmd, launcher, transport, env, watched, args.workers, events_dir, work_dir()
        )

    if args.framework is not None:
        raise AzdlError("--framework picks a built-in script; leave it out with --script")
    script = own_script.check_script(args.script)
    if {"-h", "--help"} & set(user_args):  # the script's help, once (not once per worker)
        return subprocess.call(
            [str(training_bin("python")), str(script), "--help"], env=local_env()
        )
    chosen, how = own_script.launcher_for(script, args.launcher, DEFAULT_LAUNCHER)
    if how is not None:
        print(f"azdl: {how}", file=sys.stderr, flush=True)
    for hazard in own_script.teardown_hazards(script):
        print(f"warning: {hazard}", file=sys.stderr, flush=True)
    launcher, transport = launcher_of(args, chosen)
    launch_command(  # its checks, before any folder is made
        "", args.workers, launcher, [], script=script, max_restarts=args.max_restarts,
        transport=transport,
    )  # fmt: skip
    run_dir = args.run_dir or Path("runs", f"{script.stem}-{time.strftime('%Y%m%d-%H%M%S')}")
    run_dir = folder_or_nothing(
        run_dir.expanduser().resolve(), "--run-dir",
        "the run's folder (made if missing) for its checkpoints/, logs/ and outputs/",
    )  # fmt: skip
    user_args, extra = script_run(script, args.workers, args.data, user_args, run_dir)
    guard, stall_env = stall_guard(args.stall_timeout, launcher, run_dir, args.progress_timeout)
    events_dir = run_dir / local_ledger.EVENTS_DIR
    extra |= stall_env | mlflow_environment(run_dir) | local_ledger.environment(events_dir)
    cmd = launch_command(
        "", args.workers, launcher, user_args, script=script, exports=tuple(extra), guard=guard,
        max_restarts=args.max_restarts, transport=transport,
    )  # fmt: skip
    print(f"{script.name}: {args.workers} workers, folders under {run_dir}", file=sys.stderr)
    # Run where the user is, as `python FILE` would: relative paths mean what they expect.
    env = local_env(launcher, args.workers) | extra
    return run_launcher(cmd, launcher, transport, env, run_dir, args.workers, events_dir)
