"""Benchmark results files say when, where and how they were measured, and which code (commit,
uncommitted changes, measured paths); every benchmark script writes one and declares its
paths."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_results  # noqa: E402
import provenance  # noqa: E402

# The results files' writer and reader, the baseline P1 runs as a child, and test_time.py's
# pytest plugin: not benchmarks.
NOT_SCRIPTS = ("bench_results.py", "provenance.py", "targets.py", "p1_horovod_baseline.py",
               "cpu_load.py", "cpu_per_test.py")  # fmt: skip
SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if p.name not in NOT_SCRIPTS)


@pytest.mark.slow  # git, for the commit
def test_a_run_writes_md_and_json_with_date_machine_command_load_and_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_results, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(sys, "argv", ["benchmarks/p9.py", "--rounds", "2"])
    run = bench_results.Run(["benchmarks/p2_scaling.py"])
    md = run.write(
        "p9", "P9, a test", ["variant", "images/sec"], [["1 worker", "10.0"]],
        figures={"1 worker": bench_results.Figure(10.04, 2)},
    )  # fmt: skip
    text, record = md.read_text(), json.loads(md.with_suffix(".json").read_text())
    assert "| 1 worker | 10.0 |" in text
    assert re.search(r"Measured \d{4}-\d\d-\d\d \d\d:\d\d UTC", text)
    assert re.search(r"Command: `python[\d.]* benchmarks/p9.py --rounds 2`", text)
    assert record["machine"]["cores"] and len(record["load_average"]["before"]) == 3
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    assert record["commit"] == head and f"Commit `{head[:12]}`" in text
    assert isinstance(record["dirty"], bool) and isinstance(record["dirty_files"], list)
    assert record["measures"] == ["benchmarks/p2_scaling.py"]
    assert "azdl/local.py" in record["paths"]  # imported by the script: the launch path
    assert record["figures"] == {"1 worker": {"value": 10.04, "samples": 2}}


def test_an_older_results_file_says_it_has_no_commit():
    record = json.loads((ROOT / "benchmarks" / "results" / "p2_scaling.json").read_text())
    record.pop("commit", None)
    assert "Commit: not recorded" in bench_results.markdown(record)


@pytest.mark.slow  # git
def test_a_commit_during_the_run_stops_the_write(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_results, "RESULTS_DIR", tmp_path)
    run = bench_results.Run(["benchmarks/p2_scaling.py"])
    run.source = {**run.source, "commit": "0" * 40}  # as if HEAD had moved since the start
    with pytest.raises(SystemExit, match=r"commit changed during the run .* p9 not written"):
        run.write("p9", "P9", ["a"], [[1]])
    assert not list(tmp_path.iterdir())


@pytest.mark.slow  # git
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_benchmark_declares_the_code_it_measures(script):
    """MEASURES names the script itself, and every path in it matches a file (a module split or
    renamed away from a declared path fails here, not silently)."""
    tree = ast.parse(script.read_text())
    (measures,) = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "MEASURES"
    ]
    own = f"benchmarks/{script.name}"
    assert own in measures or measures[0] == ".", (script.name, measures)
    record = provenance.measured(measures)
    assert set(measures) <= set(record["paths"])


def test_a_run_on_a_busy_machine_says_so():
    machine = {"cores": 2, "usable_cores": 2, "cpu": "c", "gpu": "none", "system": "s",
               "python": "3"}  # fmt: skip
    record = {
        "title": "t", "headers": ["a"], "rows": [[1]], "notes": [], "command": "x",
        "date": "2026-11-23 19:00 UTC", "seconds": 1, "machine": machine,
        "load_average": {"before": [11.0, 9, 6], "after": [1.0, 1, 1]},
    }  # fmt: skip
    assert "shared machine" in bench_results.markdown(record)
    record["load_average"]["before"] = [0.5, 0.5, 0.5]
    assert "shared machine" not in bench_results.markdown(record)


def test_every_benchmark_script_writes_a_results_file_and_is_in_bench_all():
    bench_all = (ROOT / "scripts" / "bench-all.sh").read_text()
    for script in SCRIPTS:
        text = script.read_text()
        assert "Run(" in text and "Run()" not in text and "run.write(" in text, script.name
        assert f"benchmarks/{script.name}" in bench_all, script.name
