"""Teardown under load: how many finished two-worker torchrun runs abort on their way out
("terminate called without an active exception", training/teardown.py) or hang there (past
--timeout), and in how many a torch.distributed thread was still alive when the worker's
destroy_process_group() returned (what both need: docs/torchrun.md, "Ending cleanly").

    .venv/bin/python benchmarks/teardown_stress.py [--runs 100] [--before REV --before-runs 40]

Runs alternate between the built-in PyTorch flavour (tiny model, 1 epoch) and
examples/torchrun/ddp_minimal.py (1 epoch), each as `azdl train --launcher torchrun` starts
them (azdl.launchers.local_torchrun, azdl.local.local_env), while --load busy processes keep
every core busy. Each worker reports the torch.distributed threads still alive when its
destroy_process_group() returns (benchmarks/teardown_census/). --before REV measures that
commit too, in a temporary git worktree, with this checkout's training environment. The abort
and the hang are races: their counts say what happened in these runs; the census says whether
something else held the process group, which makes both possible, and does not depend on luck.
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from azdl.envs import training_bin  # noqa: E402
from azdl.launchers import local_torchrun  # noqa: E402
from azdl.local import local_env  # noqa: E402
from training.teardown import TEARDOWN_ABORT  # noqa: E402

CENSUS_DIR = Path(__file__).resolve().parent / "teardown_census"
# Where a run that did not end cleanly leaves its whole output (what its line names).
FAILED_RUNS = ROOT / "out" / "teardown_stress"
# The code whose teardown is measured: the built-in flavour's process group and the example.
MEASURES = ["benchmarks/teardown_stress.py", "benchmarks/teardown_census", "training/teardown.py",
            "training/torch/distributed.py", "examples/torchrun/ddp_minimal.py"]  # fmt: skip
CLEAN = "runs that ended cleanly"  # the figure the targets table judges (benchmarks/targets.py)
KINDS = {
    "built-in flavour": ["-m", "training.torch.train", "--model", "tiny", "--image-size", "32",
                         "--num-classes", "4", "--warmup-epochs", "0", "--epochs", "1",
                         "--steps-per-epoch", "4", "--batch-size", "4", "--threads", "1",
                         "--timing-warmup-steps", "1"],
    "example script": ["examples/torchrun/ddp_minimal.py", "--epochs", "1"],
}  # fmt: skip


def one_run(tree: Path, kind: str, timeout: int) -> dict:
    """One two-worker torchrun run of `kind` in `tree`: exit code, abort, threads left."""
    python = str(training_bin("python"))
    cmd = [*local_torchrun(python, 2, 0), python, *KINDS[kind]]
    with tempfile.TemporaryDirectory(prefix="census-") as census_dir:
        env = local_env("torchrun", 2) | {
            "PYTHONPATH": f"{tree}{os.pathsep}{CENSUS_DIR}",
            "AZDL_TEARDOWN_PY": str(ROOT / "training" / "teardown.py"),
            "AZDL_CENSUS_DIR": census_dir,
        }
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)  # fmt: skip
        try:
            out, code = proc.communicate(timeout=timeout)[0], proc.returncode
        except subprocess.TimeoutExpired:
            # torchrun starts each worker in a session of its own, so killing torchrun would
            # leave a hung worker alive; SIGTERM makes it stop them (SIGTERM, then SIGKILL).
            proc.terminate()
            out, code = proc.communicate(timeout=120)[0], "timeout"
        census = [p.read_text() for p in sorted(Path(census_dir).glob("rank-*"))]
    return {
        "code": code,
        "output": out,
        "aborted": TEARDOWN_ABORT in out,
        "reported": len(census) == 2,
        "threads_left": any(names != "-" for names in census),
    }


def stress(tree: Path, runs: int, load: int, label: str, timeout: int = 300,
           after_each=None) -> list[list]:  # fmt: skip
    """`runs` runs in `tree`, alternating the kinds, with `load` busy processes beside them; a
    table row per kind: label, kind, runs, exit 0, aborts, threads left, census missing.
    `after_each(rows)`: called with the rows so far after every run."""
    from cpu_load import busy

    with busy(load):
        return _measure(tree, runs, label, timeout, after_each or (lambda rows: None))


def _measure(tree: Path, runs: int, label: str, timeout: int, after_each) -> list[list]:
    tally = {kind: {"runs": 0, "exit 0": 0, "aborts": 0, "threads left": 0, "unreported": 0}
             for kind in KINDS}  # fmt: skip
    kinds = list(KINDS)
    for i in range(runs):
        kind = kinds[i % len(kinds)]
        result = one_run(tree, kind, timeout)
        t = tally[kind]
        t["runs"] += 1
        t["exit 0"] += result["code"] == 0
        t["aborts"] += result["aborted"]
        t["threads left"] += result["threads_left"]
        t["unreported"] += not result["reported"]
        marks = "ABORT at exit " if result["aborted"] else ""
        marks += "threads left " if result["threads_left"] else ""
        marks += "census missing " if not result["reported"] else ""
        if marks or result["code"] != 0:
            FAILED_RUNS.mkdir(parents=True, exist_ok=True)
            log = FAILED_RUNS / f"{label.split()[0]}-run-{i + 1}.log"
            log.write_text(result["output"])
            marks += f"(output: {log.relative_to(ROOT)})"
        print(f"[{label}] run {i + 1}/{runs} {kind}: exit {result['code']} {marks}", flush=True)
        after_each([[label, kind, *t.values()] for kind, t in tally.items()])
    return [[label, kind, *t.values()] for kind, t in tally.items()]


def clean_ends(row: list) -> int:
    """Of a row's runs, how many certainly ended cleanly: all of them when every run exited 0
    with its census reported, no abort and no thread left; else as many as the worst count
    allows."""
    _, _, runs, exited_0, aborts, threads_left, missing = row
    return max(0, min(exited_0, runs - aborts, runs - threads_left, runs - missing))


def worktree(rev: str) -> Path:
    """A temporary checkout of `rev` (git worktree), sharing nothing with this one."""
    path = Path(tempfile.mkdtemp(prefix="teardown-before-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(path), rev],
                   check=True)  # fmt: skip
    return path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=100, help="runs of this checkout (default 100)")
    p.add_argument(
        "--before", metavar="REV", help="also measure this commit (e.g. the fix's parent)"
    )
    p.add_argument("--before-runs", type=int, default=40)
    p.add_argument("--load", type=int, default=os.cpu_count() or 1,
                   help="busy processes beside the runs (default: one per core)")  # fmt: skip
    p.add_argument("--timeout", type=int, default=300, help="seconds per run")
    p.add_argument("--name", default="teardown_stress", help="results file name")
    a = p.parse_args()
    from bench_results import Figure, Run

    run, done = Run(MEASURES), []
    title = (f"Teardown under load: two-worker torchrun runs on this machine with {a.load} busy "
             f"processes beside them; target ≥ 1.00 of this checkout's runs ending "
             f"cleanly")  # fmt: skip
    headers = ["tree", "script", "runs", "exit 0", "aborts at exit", "threads left after destroy",
               "census missing"]  # fmt: skip

    def write(rows: list[list]) -> Path:
        """The results so far (a run stopped early still leaves its counts), with the figure
        the targets table judges: the share of this checkout's runs that ended cleanly."""
        ours = [r for r in rows if r[0] == "this checkout"]
        runs = sum(r[2] for r in ours)
        clean = sum(clean_ends(r) for r in ours)
        figures = {CLEAN: Figure(clean / runs, runs)} if runs else {}
        return run.write(a.name, title, headers, done + rows, data={"load": a.load},
                         figures=figures)  # fmt: skip

    if a.before:
        before = worktree(a.before)
        try:
            rev = subprocess.run(
                ["git", "-C", str(before), "rev-parse", "--short", "HEAD"],
                capture_output=True, text=True, check=True,
            ).stdout.strip()  # fmt: skip
            done += stress(before, a.before_runs, a.load, f"before ({rev})", a.timeout, write)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)],
                           check=True)  # fmt: skip
    rows = stress(ROOT, a.runs, a.load, "this checkout", a.timeout, write)
    md = write(rows)
    print(md.read_text())
    return 0 if all(clean_ends(r) == r[2] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
