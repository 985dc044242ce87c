"""Flaky tests: each given test file run N times in a row, and its failures tallied by test.

    .venv/bin/python benchmarks/flake_hunt.py [--times 5] [--load N] FILE...

A file under tests/training/ runs in the training environment, any other in the operator one,
each as `make test` runs it (pytest from the repository root). --load N keeps N busy processes
beside the runs, as a loaded CI machine does. The results file is rewritten after every run, so
a hunt stopped early still leaves its counts; a run that failed leaves its whole output in
out/flake_hunt/, named in its line. A failure is a finding to fix at its root, never to retry.
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from azdl.envs import training_bin  # noqa: E402

# What a tally measured: the whole tree but the results (any change can make a test flaky).
MEASURES = [".", ":(exclude)benchmarks/results"]
FAILED_RUNS = ROOT / "out" / "flake_hunt"
FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", metavar="FILE", help="test files, from the repository root")
    p.add_argument("--times", type=int, default=5, help="runs of each file (default 5)")
    p.add_argument("--load", type=int, default=0, help="busy processes beside the runs")
    p.add_argument("--name", default="flake_hunt", help="results file name")
    a = p.parse_args()
    missing = [f for f in a.files if not (ROOT / f).is_file()]
    if missing:
        p.error(f"no such test file: {', '.join(missing)} (give paths from the repository root)")
    from bench_results import Run
    from cpu_load import busy

    run = Run(MEASURES)
    title = f"Flaky tests: each file run {a.times} times in a row, {a.load} busy processes beside"
    headers = ["test file", "runs", "passed", "failed", "failing tests (times)"]
    tally = {f: {"runs": 0, "passed": 0, "failed": 0, "tests": {}} for f in a.files}

    def write() -> Path:
        rows = [[f, t["runs"], t["passed"], t["failed"],
                 ", ".join(f"{k} ({v})" for k, v in sorted(t["tests"].items())) or "-"]
                for f, t in tally.items()]  # fmt: skip
        return run.write(a.name, title, headers, rows, data={"load": a.load, "times": a.times})

    with busy(a.load):
        for test_file in a.files:
            t = tally[test_file]
            for i in range(a.times):
                code, out = one_run(test_file)
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
    print(write().read_text())
    return 0 if all(t["failed"] == 0 for t in tally.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
