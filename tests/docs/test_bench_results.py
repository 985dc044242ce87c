"""Benchmark results files say when, where and how they were measured, and every benchmark
script writes one."""

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_results  # noqa: E402


def test_a_run_writes_md_and_json_with_date_machine_command_and_load(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_results, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(sys, "argv", ["benchmarks/p9.py", "--rounds", "2"])
    run = bench_results.Run()
    md = run.write("p9", "P9, a test", ["variant", "images/sec"], [["1 worker", "10.0"]])
    text, record = md.read_text(), json.loads(md.with_suffix(".json").read_text())
    assert "| 1 worker | 10.0 |" in text
    assert re.search(r"Measured \d{4}-\d\d-\d\d \d\d:\d\d UTC", text)
    assert re.search(r"Command: `python[\d.]* benchmarks/p9.py --rounds 2`", text)
    assert record["machine"]["cores"] and len(record["load_average"]["before"]) == 3


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
    modules = ("bench_results.py", "targets.py")  # the results files' writer and reader
    scripts = [p for p in (ROOT / "benchmarks").glob("*.py") if p.name not in modules]
    for script in scripts:
        if script.name == "p1_horovod_baseline.py":
            continue  # the baseline P1 runs as a child
        text = script.read_text()
        assert "Run()" in text and "run.write(" in text, script.name
        assert f"benchmarks/{script.name}" in bench_all, script.name
