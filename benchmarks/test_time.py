"""Where `make test`'s time goes, per stream and per file, before and after a cut: this run's
`scripts/test.sh --durations=0` (the README's `make test` without its set-up) beside the run
the results file recorded last (its commit and date with it), or beside the log of an earlier
run of the same command on the same machine, whose commit is given.

    python benchmarks/test_time.py [--before-log LOG --before-commit COMMIT]

The streams run at the same time on the machine's cores (scripts/test.sh): the training side in
the foreground; the operator side, then the GPU kit's smoke run, in the background. Each
stream's time is pytest's own summary of it; a file's time is the sum of its tests' setup, call
and teardown. Targets (issue 33): the training stream and the kit's smoke each at most half of
their time before. Writes benchmarks/results/test_time.{md,json}; exits non-zero when the suite
fails or a log cannot be read.
"""

import argparse
import json
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from bench_results import RESULTS_DIR, Figure, Run

ROOT = Path(__file__).resolve().parent.parent
# The whole committed tree the suite runs on, but the results files.
MEASURES = [".", ":(exclude)benchmarks/results"]
STREAMS = ("training", "operator", "kit")
TARGET = {"training": 0.5, "kit": 0.5}  # at most this share of the time before
# scripts/test.sh prints the foreground's pytest output first, then each background log after
# its own "==> " line.
SECTION = {
    "operator": "==> operator tests (.venv):",
    "kit": "==> the GPU kit's smoke run (.venv-train):",
}
SUMMARY = re.compile(r"^=+ (?P<what>.*\d+ (?:passed|failed|error).*) in (?P<s>[\d.]+)s")
DURATION = re.compile(r"^(?P<s>[\d.]+)s (?:setup|call|teardown) +(?P<file>[^:\s]+)::")


class LogError(Exception):
    """A log that is not scripts/test.sh's output with --durations=0."""


def read_log(text: str) -> dict:
    """Per stream: pytest's summary and seconds, and the seconds of each test file."""
    starts = {name: text.find(marker) for name, marker in SECTION.items()}
    if min(starts.values()) < 0:
        raise LogError("no operator or kit section: not scripts/test.sh's output")
    bounds = {
        "training": (0, starts["operator"]),
        "operator": (starts["operator"], starts["kit"]),
        "kit": (starts["kit"], len(text)),
    }
    streams = {}
    for name, (start, end) in bounds.items():
        summary, files = None, defaultdict(float)
        for line in text[start:end].splitlines():
            if m := SUMMARY.match(line):
                summary = (m["what"], float(m["s"]))
            elif m := DURATION.match(line):
                files[m["file"]] += float(m["s"])
        if summary is None:
            raise LogError(f"the {name} stream has no pytest summary line")
        if not files:
            raise LogError(f"the {name} stream lists no durations: run it with --durations=0")
        streams[name] = {"summary": summary[0], "seconds": summary[1], "files": dict(files)}
    return streams


def per_file(streams: dict) -> dict[str, float]:
    """Each test file's seconds, whichever stream ran it."""
    return {f: t for name in STREAMS for f, t in streams[name]["files"].items()}


def run_suite(log: Path) -> tuple[int, float]:
    """scripts/test.sh --durations=0 in this checkout, its output to the terminal and `log`."""
    started = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["scripts/test.sh", "--durations=0"], cwd=ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        for line in proc.stdout:
            sys.stdout.write(line)
            out.write(line)
    return proc.wait(), time.perf_counter() - started


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--before-log",
        type=Path,
        help="an earlier run's output of scripts/test.sh --durations=0 (default: "
        "the run benchmarks/results/test_time.json recorded last)",
    )
    p.add_argument("--before-commit", help="the commit the --before-log run measured")
    p.add_argument(
        "--log",
        type=Path,
        default=ROOT / "out" / "test-time.log",
        help="where this run's output is kept (default: out/test-time.log)",
    )
    a = p.parse_args()
    if (a.before_log is None) != (a.before_commit is None):
        p.error("--before-log and --before-commit go together")
    if a.before_log is not None:
        try:
            before = read_log(a.before_log.read_text())
        except (OSError, LogError) as e:
            sys.exit(f"error: --before-log {a.before_log}: {e}")
        before_commit, before_what = a.before_commit, "its commit as given"
    else:
        try:
            last = json.loads((RESULTS_DIR / "test_time.json").read_text())
        except (OSError, ValueError) as e:
            sys.exit(f"error: no earlier run to compare with ({e}): give --before-log")
        before = last["data"]["after"]["streams"]
        before_commit, before_what = last["commit"][:7], f"recorded {last['date']}"
    run = Run(MEASURES)
    a.log.parent.mkdir(parents=True, exist_ok=True)
    code, wall = run_suite(a.log)
    try:
        after = read_log(a.log.read_text())
    except LogError as e:
        sys.exit(f"error: this run's log {a.log}: {e}")
    commit = run.source["commit"][:7]
    rows, figures = [], {}
    for name in STREAMS:
        share = after[name]["seconds"] / before[name]["seconds"]
        target = TARGET.get(name)
        verdict = "" if target is None else ("met" if share <= target else "NOT met")
        rows.append([name, f"{before[name]['seconds']:.0f}", f"{after[name]['seconds']:.0f}",
                     f"{share:.2f}", "" if target is None else f"≤ {target:.2f}", verdict,
                     after[name]["summary"]])  # fmt: skip
        figures[f"{name} share"] = Figure(share, 1)
    was, now = per_file(before), per_file(after)
    slowest = sorted(was.keys() | now.keys(), key=lambda f: -(was.get(f, 0) + now.get(f, 0)))
    files = [[f, f"{was.get(f, 0):.0f}", f"{now.get(f, 0):.0f}"] for f in slowest[:25]]
    run.write(
        "test_time",
        f"`make test`'s streams, seconds: before ({before_commit}) and after ({commit}), "
        "each measured once on this machine",
        ["stream", "before", "after", "after / before", "target", "", "after: pytest's summary"],
        rows,
        notes=[
            f"Before: `scripts/test.sh --durations=0` at `{before_commit}` (an earlier run on "
            f"this machine, {before_what}); after: this run, at `{commit}`, {wall:.0f} s wall, "
            f"exit {code}. The set-up (`make setup`) is not timed.",
            "The training stream runs in the foreground; the operator stream, then the kit's "
            "smoke run, in the background, both streams sharing the machine's cores.",
            "The 25 slowest files, seconds (setup + call + teardown of their tests), before → "
            "after: " + "; ".join(f"`{f}` {b} → {x}" for f, b, x in files) + ".",
        ],
        data={"before": {"commit": before_commit, "streams": before},
              "after": {"commit": commit, "exit_code": code, "wall_s": wall, "streams": after}},
        figures=figures,
    )  # fmt: skip
    return code


if __name__ == "__main__":
    sys.exit(main())
