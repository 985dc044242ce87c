"""Flaky tests: each given test file run N times in a row, and its failures tallied by test.

    .venv/bin/python benchmarks/flake_hunt.py [--times 5] [--lanes 2] [--load N] [--add] FILE...

A file under tests/training/ runs in the training environment, any other in the operator one,
each as `make test` runs it (pytest from the repository root). --lanes 2 runs two files at once,
as `make test` runs its two streams side by side on a 2-core machine, so every run has another
file's run beside it; --load N adds N busy processes, a machine loaded beyond that. The files
are taken longest first (by the suite's last per-file times, benchmarks/results/test_time.json).
The results file is rewritten after every run, so a hunt stopped early still leaves its counts;
--add keeps the rows of files not given this time (each row names the commit and conditions it
ran at), so a hunt too long for one sitting is done in parts. A run that failed leaves its whole
output in out/flake_hunt/, named in its line. A failure is a finding to fix at its root, never
to retry.
"""

import argparse
import json
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from azdl.envs import training_bin  # noqa: E402

# What a tally measured: the whole tree but the results (any change can make a test flaky).
MEASURES = [".", ":(exclude)benchmarks/results"]
FAILED_RUNS = ROOT / "out" / "flake_hunt"
FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)
HEADERS = ["test file", "runs", "passed", "failed", "failing tests (times)", "beside", "commit"]


def python_for(test_file: str) -> str:
    """The environment `make test` runs the file in (scripts/test.sh)."""
    if test_file.startswith("tests/training/"):
        return str(training_bin("python"))
    return str(ROOT / ".venv" / "bin" / "python")


def one_run(test_file: str) -> tuple[int, str]:
    """pytest's exit code and its whole output for one run of `test_file`."""
    proc = subprocess.run(
        [python_for(test_file), "-m", "pytest", test_file, "-p", "no:cacheprovider", "-q", "-rfE"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def longest_first(files: list[str], results_dir: Path) -> list[str]:
    """`files` by the suite's last recorded time per file, longest first (unknown ones last)."""
    try:
        last = json.loads((results_dir / "test_time.json").read_text())["data"]["after"]
        seconds = {f: s for stream in last["streams"].values() for f, s in stream["files"].items()}
    except (OSError, ValueError, KeyError):
        seconds = {}
    return sorted(files, key=lambda f: -seconds.get(f, 0.0))


def earlier_rows(results_dir: Path, name: str, files: list[str]) -> dict[str, dict]:
    """The tally's rows of files not hunted this time, as the results file recorded them."""
    try:
        record = json.loads((results_dir / f"{name}.json").read_text())
    except OSError:
        return {}
    except ValueError as e:
        sys.exit(f"error: --add: benchmarks/results/{name}.json is not JSON ({e})")
    return {f: t for f, t in record["data"]["files"].items() if f not in files}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", metavar="FILE", help="test files, from the repository root")
    p.add_argument("--times", type=int, default=5, help="runs of each file (default 5)")
    p.add_argument("--lanes", type=int, default=1, help="files run at once (default 1)")
    p.add_argument("--load", type=int, default=0, help="busy processes beside the runs")
    p.add_argument("--add", action="store_true", help="keep the earlier rows of other files")
    p.add_argument("--name", default="flake_hunt", help="results file name")
    a = p.parse_args()
    missing = [f for f in a.files if not (ROOT / f).is_file()]
    if missing:
        p.error(f"no such test file: {', '.join(missing)} (give paths from the repository root)")
    if a.times < 1 or a.lanes < 1 or a.load < 0:
        p.error("--times and --lanes take 1 or more, --load 0 or more")
    from bench_results import RESULTS_DIR, Run
    from cpu_load import busy

    run = Run(MEASURES)
    commit = run.source["commit"][:7] + ("+dirty" if run.source["dirty_measured"] else "")
    beside = f"{a.lanes - 1} other file(s), {a.load} busy process(es)"
    tally = earlier_rows(RESULTS_DIR, a.name, a.files) if a.add else {}
    for f in a.files:
        tally[f] = {"runs": 0, "passed": 0, "failed": 0, "tests": {}, "beside": beside,
                    "commit": commit}  # fmt: skip
    lock = threading.Lock()

    def write() -> Path:
        rows = [[f, t["runs"], t["passed"], t["failed"],
                 ", ".join(f"{k} ({v})" for k, v in sorted(t["tests"].items())) or "-",
                 t["beside"], t["commit"]]
                for f, t in sorted(tally.items())]  # fmt: skip
        title = f"Flaky tests: each file run {a.times} times in a row"
        return run.write(a.name, title, HEADERS, rows, data={"files": tally, "times": a.times})

    todo: queue.Queue[str] = queue.Queue()
    for f in longest_first(a.files, RESULTS_DIR):
        todo.put(f)

    stopped: list[BaseException] = []  # a lane's error, e.g. Run.write refusing a changed tree

    def lane() -> None:
        try:
            hunt()
        except BaseException as e:  # said below, once the other lanes end
            stopped.append(e)

    def hunt() -> None:
        while not stopped:
            try:
                test_file = todo.get_nowait()
            except queue.Empty:
                return
            for i in range(a.times):
                code, out = one_run(test_file)
                with lock:
                    t = tally[test_file]
                    t["runs"] += 1
                    line = f"{test_file} run {i + 1}/{a.times}: exit {code}"
                    if code == 0:
                        t["passed"] += 1
                    else:
                        t["failed"] += 1
                        for test in FAILED.findall(out) or [f"(pytest exit {code})"]:
                            t["tests"][test] = t["tests"].get(test, 0) + 1
                        FAILED_RUNS.mkdir(parents=True, exist_ok=True)
                        log = FAILED_RUNS / f"{Path(test_file).stem}-run-{i + 1}.log"
                        log.write_text(out)
                        line += f" (output: {log.relative_to(ROOT)})"
                    print(line, flush=True)
                    write()

    with busy(a.load):
        lanes = [threading.Thread(target=lane) for _ in range(a.lanes)]
        for t in lanes:
            t.start()
        for t in lanes:
            t.join()
    if stopped:
        sys.exit(f"error: the hunt stopped: {stopped[0]}")
    print(write().read_text())
    hunted = [tally[f] for f in a.files]
    return 0 if all(t["failed"] == 0 and t["runs"] == a.times for t in hunted) else 1


if __name__ == "__main__":
    sys.exit(main())
