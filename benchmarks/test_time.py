"""Where `make test`'s time goes, per stream and per file, before and after a cut, both measured in
this one run on this machine: `scripts/test.sh --durations=0` (the README's `make test` without its
set-up) first in a clone of the commit before the cut, set up from nothing (`make setup`, not
timed), then in a fresh clone of HEAD, set up as the README has a newcomer do it (`make demo`,
then the rest of `make test`'s set-up), which is timed: the cold run's time. Uncommitted changes
to the tree are refused (the clone would not have them).

    python benchmarks/test_time.py [--before COMMIT]

COMMIT defaults to the commit the results file last measured as "before" (the suite before the cuts
began). A run recorded earlier is never the "before": machines of one name differ by 2×
(docs/testing.md), so only a pair measured together is a ratio of the suite's work. The streams run
at the same time on the machine's cores (scripts/test.sh): the training side in the foreground; the
operator side, then the GPU kit's smoke run, in the background. Each stream's time is pytest's own
summary of it; a file's time is the sum of its tests' setup, call and teardown. Targets (issue 33):
the training stream and the kit's smoke each at most half of their time before. Writes
benchmarks/results/test_time.{md,json}; exits non-zero when either suite fails or a log cannot be
read.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import cpu_per_test
from bench_results import RESULTS_DIR, Figure, Run

ROOT = Path(__file__).resolve().parent.parent
# The whole committed tree the suite runs on, but the results files.
MEASURES = [".", ":(exclude)benchmarks/results"]
STREAMS = ("training", "operator", "kit")
KIT_FILE = "tests/training/test_gpu_bench.py"  # the kit's smoke run (scripts/test.sh)
CPU_PLUGIN = "cpu_per_test"  # benchmarks/cpu_per_test.py
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


def suite_env(tmp: Path) -> tuple[dict[str, str], Path]:
    """The environment a suite runs in, with folders under `tmp`: the folder the CPU plugin's
    records go to, and an empty kernel cache for torch.compile, as on a fresh CI machine (its
    default folder, /tmp/torchinductor_$USER, outlives a run: the suite that ran second would
    find the first one's kernels). PYTHONPATH stays as it is: the suite's own processes inherit
    it (a test at a66fa3b planted a module through it, relying on it being unset)."""
    cpu, cache = tmp / "cpu", tmp / "inductor"
    cpu.mkdir()
    env = os.environ | {"TORCHINDUCTOR_CACHE_DIR": str(cache), cpu_per_test.DIR_ENV: str(cpu)}
    return env, cpu


def install_plugin(checkout: Path) -> None:
    """The CPU plugin into the site-packages of both of the checkout's environments, which
    test_time made for this run and removes after it, so that `-p cpu_per_test` finds it."""
    for venv in (".venv", ".venv-train"):
        purelib = subprocess.run(
            [str(checkout / venv / "bin" / "python"), "-c",
             "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        shutil.copy(Path(__file__).with_name(f"{CPU_PLUGIN}.py"), purelib)


def read_cpu(folder: Path) -> dict[str, float]:
    """The CPU seconds of each test that cpu_per_test.py recorded in `folder`."""
    return {
        record["test"]: record["cpu_s"]
        for lines in folder.glob("*.jsonl")
        for record in map(json.loads, lines.read_text().splitlines())
    }


def run_suite(checkout: Path, log: Path) -> tuple[int, float, dict[str, float]]:
    """scripts/test.sh --durations=0 in `checkout` (suite_env), its output to the terminal and
    `log`; its exit code, wall seconds, and the CPU seconds of each test."""
    install_plugin(checkout)
    started = time.perf_counter()
    with log.open("w") as out, tempfile.TemporaryDirectory(prefix="azdl-suite-") as tmp:
        env, cpu = suite_env(Path(tmp))
        proc = subprocess.Popen(
            ["scripts/test.sh", "--durations=0", "-p", CPU_PLUGIN], cwd=checkout, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        for line in proc.stdout:
            sys.stdout.write(line)
            out.write(line)
        code = proc.wait()
        tests = read_cpu(cpu)
    return code, time.perf_counter() - started, tests


def stream_of(test: str) -> str:
    """Which of scripts/test.sh's streams runs a test (its node id)."""
    if test.startswith(KIT_FILE):
        return "kit"
    return "training" if test.startswith("tests/training/") else "operator"


def cpu_by(tests: dict[str, float], key) -> dict[str, float]:
    """The tests' CPU seconds summed by key(node id)."""
    sums: dict[str, float] = defaultdict(float)
    for test, seconds in tests.items():
        sums[key(test)] += seconds
    return dict(sums)


def clone_at(commit: str, where: Path) -> None:
    """A clone of this repository at `commit` in `where`, with nothing set up."""
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(where)], check=True)
    subprocess.run(["git", "-C", str(where), "checkout", "-q", commit], check=True)


def set_up_before(commit: str, where: Path) -> None:
    """A clone of this repository at `commit` in `where`, its environments made from nothing."""
    print(f"==> test_time: cloning {commit} into {where} and running its `make setup`", flush=True)
    clone_at(commit, where)
    subprocess.run(["make", "--no-print-directory", "setup"], cwd=where, check=True)


def set_up_cold(commit: str, where: Path) -> dict[str, float]:
    """A clone at `commit` in `where`, set up as the README has a newcomer do it, from nothing:
    `make demo` (both environments, then the local 2-worker job), then the rest of `make test`'s
    set-up (`make setup`: Azurite; scripts/setup-browser.sh). Seconds of each."""
    print(f"==> test_time: cloning {commit} into {where}: `make demo`, `make test`", flush=True)
    clone_at(commit, where)
    seconds = {}
    for name, cmd in (("make demo", ["make", "--no-print-directory", "demo"]),
                      ("make setup", ["make", "--no-print-directory", "setup"]),
                      ("setup-browser.sh", ["scripts/setup-browser.sh"])):  # fmt: skip
        started = time.perf_counter()
        subprocess.run(cmd, cwd=where, check=True)
        seconds[name] = time.perf_counter() - started
    return seconds


def recorded_before() -> str:
    """The commit the results file last measured as "before"."""
    try:
        return json.loads((RESULTS_DIR / "test_time.json").read_text())["data"]["before"]["commit"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"error: no recorded run to take the before commit from ({e}): give --before")


def read(log: Path, what: str) -> dict:
    try:
        return read_log(log.read_text())
    except (OSError, LogError) as e:
        sys.exit(f"error: the {what} run's log {log}: {e}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--before",
        metavar="COMMIT",
        help="the commit before the cut (default: the one the results file measured as before)",
    )
    p.add_argument(
        "--logs",
        type=Path,
        default=ROOT / "out",
        help="where both runs' output is kept: test-time-before.log, test-time.log (default: out)",
    )
    a = p.parse_args()
    before_commit = a.before or recorded_before()
    try:
        full = subprocess.run(
            ["git", "rev-parse", "--verify", f"{before_commit}^{{commit}}"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except subprocess.CalledProcessError:
        sys.exit(f"error: --before {before_commit}: not a commit of this repository")
    before_commit = full[:7]
    run = Run(MEASURES)
    if run.source["dirty_measured"]:
        sys.exit("error: the after suite runs in a fresh clone of HEAD, which lacks the "
                 f"uncommitted changes to {', '.join(run.source['dirty_measured'])}: commit "
                 "them first")  # fmt: skip
    a.logs.mkdir(parents=True, exist_ok=True)
    before_log, after_log = a.logs / "test-time-before.log", a.logs / "test-time.log"
    with tempfile.TemporaryDirectory(prefix="azdl-test-time-") as tmp:
        clone = Path(tmp) / "before"
        set_up_before(full, clone)
        print(f"==> test_time: the suite at {before_commit} (before)", flush=True)
        before_code, before_wall, before_cpu = run_suite(clone, before_log)
        shutil.rmtree(clone, ignore_errors=True)  # its environments: gigabytes
        if before_code != 0:
            sys.exit(f"error: the suite at {before_commit} failed (exit {before_code}): "
                     f"{before_log}")  # fmt: skip
        clone = Path(tmp) / "after"
        cold = set_up_cold(run.source["commit"], clone)
        print("==> test_time: the suite at HEAD (after), in that clone", flush=True)
        code, wall, after_cpu = run_suite(clone, after_log)
        shutil.rmtree(clone, ignore_errors=True)
    cold["suite"] = wall
    before, after = read(before_log, "before"), read(after_log, "after")
    commit = run.source["commit"][:7]
    cpu = {"before": cpu_by(before_cpu, stream_of), "after": cpu_by(after_cpu, stream_of)}
    rows, figures = [], {}
    for name in STREAMS:
        share = after[name]["seconds"] / before[name]["seconds"]
        target = TARGET.get(name)
        verdict = "" if target is None else ("met" if share <= target else "NOT met")
        cpu_was, cpu_now = cpu["before"].get(name, 0.0), cpu["after"].get(name, 0.0)
        rows.append([name, f"{before[name]['seconds']:.0f}", f"{after[name]['seconds']:.0f}",
                     f"{share:.2f}", "" if target is None else f"≤ {target:.2f}", verdict,
                     f"{cpu_was:.0f} → {cpu_now:.0f}",
                     f"{cpu_now / cpu_was:.2f}" if cpu_was else "–",
                     after[name]["summary"]])  # fmt: skip
        figures[f"{name} share"] = Figure(share, 1)
    was, now = per_file(before), per_file(after)
    by_file = {when: cpu_by(tests, lambda t: t.split("::")[0])
               for when, tests in (("before", before_cpu), ("after", after_cpu))}  # fmt: skip
    slowest = sorted(was.keys() | now.keys(), key=lambda f: -(was.get(f, 0) + now.get(f, 0)))
    files = [[f, f"{was.get(f, 0):.0f}", f"{now.get(f, 0):.0f}",
              f"{by_file['before'].get(f, 0):.0f}", f"{by_file['after'].get(f, 0):.0f}"]
             for f in slowest[:25]]  # fmt: skip
    run.write(
        "test_time",
        f"`make test`'s streams, seconds: before ({before_commit}) and after ({commit}), "
        "both measured in this run on this machine",
        ["stream", "before", "after", "after / before", "target", "", "CPU s", "CPU after / before",
         "after: pytest's summary"],
        rows,
        notes=[
            f"Before: `scripts/test.sh --durations=0` in a clone at `{before_commit}`, "
            f"{before_wall:.0f} s wall; after: the same in a fresh clone at `{commit}`, "
            f"{wall:.0f} s wall, exit {code}; one after the other, in this run. The before's "
            "set-up (`make setup`) is not timed; the after's is, below.",
            "After: a fresh clone of HEAD, set up as the README has a newcomer do it; the cold "
            "`make demo` + `make test` took "
            + " + ".join(f"{name} {seconds:.0f} s" for name, seconds in cold.items())
            + f" = {sum(cold.values()):.0f} s ({sum(cold.values()) / 60:.1f} minutes), "
            "pip's and npm's caches as this machine holds them.",
            "The training stream runs in the foreground; the operator stream, then the kit's "
            "smoke run, in the background, both streams sharing the machine's cores.",
            "CPU s: the CPU time of the stream's tests, their pytest process's and that of the "
            "processes they started and waited for (`benchmarks/cpu_per_test.py`); it grows far "
            "less than a stream's wall time when the other stream keeps the cores busy.",
            "The 25 slowest files, seconds (setup + call + teardown of their tests), before → "
            "after, and their CPU seconds: "
            + "; ".join(f"`{f}` {b} → {x} (CPU {cb} → {cx})" for f, b, x, cb, cx in files)
            + ".",
        ],
        data={"before": {"commit": before_commit, "wall_s": before_wall, "streams": before,
                         "cpu_s": {"streams": cpu["before"], "files": by_file["before"]}},
              "after": {"commit": commit, "exit_code": code, "wall_s": wall, "streams": after,
                        "cold_s": cold,
                        "cpu_s": {"streams": cpu["after"], "files": by_file["after"]}}},
        figures=figures,
    )  # fmt: skip
    return code


if __name__ == "__main__":
    sys.exit(main())
