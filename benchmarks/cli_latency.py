"""How long `azdl` takes to answer: its help, the refusal of bad input, shell completion, and a
diff of two stacks, before and after a change, in one run on one machine.

The baseline is a git revision (`--baseline`, default BASELINE: the last one whose commands
imported every library at start-up and re-rendered both stacks for a diff) exported with `git
archive` into a temporary folder; both trees run with this checkout's operator environment
(.venv), each with its own folder first on PYTHONPATH, so the same interpreter and libraries
time both. Every
command runs REPEAT times, alternating between the trees; the table has the median wall time of
each, and the exit code (2: the bad input was refused). `azdl diff dev prod` runs once before
its timed runs in both trees, so a tree that keeps plans (azdl.review.render_cache) is timed
reusing them, as a second `azdl diff` would.

    python benchmarks/cli_latency.py [--baseline REF] [--repeat 5]

Writes benchmarks/results/cli_latency.{md,json}.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_results import Run

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"
EXAMPLE_OUTPUTS = "docs/stack-outputs.example.json"
# (what it shows, the arguments after `azdl`). The bad inputs are ones a user types: each is
# refused with exit 2 and one `error:` line.
COMMANDS = [
    ("help", ["--help"]),
    ("a command's help", ["submit", "--help"]),
    ("bad option value", ["submit", "--outputs", EXAMPLE_OUTPUTS, "--nodes", "0"]),
    ("more nodes than the cluster has", ["submit", "--outputs", EXAMPLE_OUTPUTS, "--nodes", "99"]),
    ("unknown stack", ["plan", "nosuch"]),
    ("invalid stack setting", ["plan", "clilatency"]),  # README step 2's example of a bad value
    ("training option before `--`", ["train", "--epochs", "3"]),
    ("bad number", ["estimate", "--budget", "-1"]),
    ("missing local folder", ["data", "stage", "/nowhere", "--outputs", EXAMPLE_OUTPUTS]),
    ("completion script", ["--print-completion", "bash"]),
    ("diff of two stacks", ["diff", "dev", "prod"]),
]
WARM_UP = {"diff of two stacks"}
# The stack file of "invalid stack setting", written into each tree for the run: dev's, with
# cluster.minNodes above maxNodes.
BAD_STACK = "clilatency"
BASELINE = "dddebce"
# The code its figures depend on: the "after" column times this checkout's CLI, which renders
# the program (infra/) for the diff, with the pinned operator libraries.
MEASURES = [
    "benchmarks/cli_latency.py",
    "azdl/",
    "infra/",
    "policies/",
    "stacks/",
    "requirements.txt",
    "pyproject.toml",
]


def export(ref: str, into: Path) -> str:
    """The tree of `ref` in `into`; its commit id."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return commit


def timed(tree: Path, args: list[str]) -> tuple[float, int]:
    env = os.environ | {"PYTHONPATH": str(tree), "NO_COLOR": "1", "COLUMNS": "100"}
    env.pop("AZDL_PRICES", None)
    started = time.perf_counter()
    code = subprocess.run(
        [str(PYTHON), "-m", "azdl", *args], cwd=tree, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900,
    ).returncode  # fmt: skip
    return time.perf_counter() - started, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per command (5)")
    args = parser.parse_args()
    run = Run(MEASURES)
    with tempfile.TemporaryDirectory(prefix="azdl-baseline-") as tmp:
        base = Path(tmp)
        commit = export(args.baseline, base)
        trees = {"before": base, "after": ROOT}
        for tree in trees.values():
            dev = (tree / "stacks" / "Pulumi.dev.yaml").read_text()
            bad = dev.replace("minNodes: 0", "minNodes: 5")
            assert bad != dev, "no `minNodes: 0` in the dev stack file"
            (tree / "stacks" / f"Pulumi.{BAD_STACK}.yaml").write_text(bad)
        rows, data = [], {}
        try:
            measure(trees, args.repeat, rows, data)
        finally:
            (ROOT / "stacks" / f"Pulumi.{BAD_STACK}.yaml").unlink()
        python_alone = statistics.median(timed_python() for _ in range(args.repeat))
    run.write(
        "cli_latency",
        f"azdl's answer time, median of {args.repeat} runs in seconds: before ({commit}) and "
        f"after (this checkout); Python alone starts in {python_alone:.2f} s",
        ["what", "command", "before", "after", "speed-up", "exit code"],
        rows,
        notes=[
            "Each command runs as `.venv/bin/python -m azdl …` with its tree first on "
            "PYTHONPATH, output discarded; exit code 2 is the refusal of bad input (4 before: "
            "`data stage` asked for a sign-in before it looked at the folder).",
            "`azdl diff dev prod` ran once before the timed runs in each tree: the after column "
            "reuses the plans kept from that run, as a repeated diff does.",
        ],
        data={
            "baseline": {"ref": args.baseline, "commit": commit},
            "runs": data,
            "python_alone": python_alone,
        },
    )
    return 0


def measure(trees: dict[str, Path], repeat: int, rows: list, data: dict) -> None:
    """Time every command in both trees, alternating; a row and its raw times per command."""
    for label, argv in COMMANDS:
        times: dict[str, list[float]] = {"before": [], "after": []}
        codes: dict[str, set[int]] = {"before": set(), "after": set()}
        if label in WARM_UP:
            for tree in trees.values():
                timed(tree, argv)
        for _ in range(repeat):
            for name, tree in trees.items():
                seconds, code = timed(tree, argv)
                times[name].append(seconds)
                codes[name].add(code)
        before, after = (statistics.median(times[n]) for n in ("before", "after"))
        shown = "azdl " + " ".join(argv)
        exits = ["/".join(str(c) for c in sorted(codes[n])) for n in ("before", "after")]
        rows.append([
            label, f"`{shown}`", f"{before:.2f}", f"{after:.2f}", f"{before / after:.1f}×",
            exits[1] if exits[0] == exits[1] else f"{exits[0]} → {exits[1]}",
        ])  # fmt: skip
        data[shown] = {"before": times["before"], "after": times["after"],
                       "exit_codes": {n: sorted(c) for n, c in codes.items()}}  # fmt: skip
        print(f"{label}: {before:.2f} s -> {after:.2f} s", flush=True)


def timed_python() -> float:
    started = time.perf_counter()
    subprocess.run([str(PYTHON), "-c", "pass"], check=True)
    return time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main())
