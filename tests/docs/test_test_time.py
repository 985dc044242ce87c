"""benchmarks/test_time.py's reader, on the whole log of a real run: `scripts/test.sh
--durations=0` at fd20ff2 on this machine, 2026-11-29, as benchmarks/test_time.py kept it
(data/test-time-fd20ff2.log.gz). pytest's own summary line of each stream is the truth the
per-file sums are held to: with --durations=0 pytest lists every setup, call and teardown
(those under 5 ms hidden), so a stream's files add up to its time less collection and start-up."""

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import test_time  # noqa: E402

LOG = Path(__file__).parent / "data" / "test-time-fd20ff2.log.gz"


@pytest.fixture(scope="module")
def log() -> str:
    return gzip.decompress(LOG.read_bytes()).decode()


def test_each_stream_is_pytests_summary_and_its_files_add_up_to_it(log):
    streams = test_time.read_log(log)
    assert {name: (s["summary"], s["seconds"]) for name, s in streams.items()} == {
        "training": ("351 passed, 64 warnings", 1951.10),
        "operator": ("1252 passed, 1 skipped", 1516.65),
        "kit": ("19 passed", 327.55),
    }
    for name, stream in streams.items():
        total = sum(stream["files"].values())
        assert 0.95 * stream["seconds"] <= total <= stream["seconds"], (name, total)
    assert list(streams["kit"]["files"]) == ["tests/training/test_gpu_bench.py"]
    assert all(f.startswith("tests/training/") for f in streams["training"]["files"])
    assert not any(f.startswith("tests/training/") for f in streams["operator"]["files"])
    files = test_time.per_file(streams)  # a file runs in one stream
    assert len(files) == sum(len(s["files"]) for s in streams.values())


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        (lambda log: log.replace(test_time.SECTION["kit"], "==> "), "no operator or kit section"),
        (
            lambda log: "\n".join(
                line for line in log.splitlines() if not test_time.DURATION.match(line)
            ),
            "lists no durations: run it with --durations=0",
        ),
        (
            lambda log: log.replace(" in 1951.10s (0:32:31) ", " "),
            "the training stream has no pytest summary line",
        ),
    ],
)
def test_a_log_that_is_not_the_commands_output_is_refused(log, cut, message):
    with pytest.raises(test_time.LogError, match=message):
        test_time.read_log(cut(log))


# A test that waits for a process which burns CPU, and one that does nothing.
TESTS = """
import subprocess, sys, time

def test_busy():
    subprocess.run([sys.executable, "-c", "import time\\nt = time.process_time()\\n"
                    "while time.process_time() - t < 0.6: pass"], check=True)

def test_idle():
    time.sleep(0.3)
"""


def test_each_tests_cpu_counts_the_processes_it_waited_for(tmp_path):
    (tmp_path / "test_pair.py").write_text(TESTS)
    env, cpu = test_time.suite_env(tmp_path)
    assert env.get("PYTHONPATH") == os.environ.get("PYTHONPATH")  # the suite's processes inherit it
    # As install_plugin puts it into a checkout's environments: importable by name.
    (tmp_path / "site").mkdir()
    shutil.copy(ROOT / "benchmarks" / f"{test_time.CPU_PLUGIN}.py", tmp_path / "site")
    env = env | {"PYTHONPATH": str(tmp_path / "site")}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "test_pair.py", "-q", "-p", test_time.CPU_PLUGIN,
         "-p", "no:cacheprovider"], cwd=tmp_path, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    seconds = test_time.read_cpu(cpu)
    assert seconds.keys() == {"test_pair.py::test_busy", "test_pair.py::test_idle"}
    assert seconds["test_pair.py::test_busy"] >= 0.6, seconds  # the child's, not pytest's
    assert seconds["test_pair.py::test_idle"] < 0.2, seconds  # sleeping costs none
    cache = Path(env["TORCHINDUCTOR_CACHE_DIR"])  # a kernel cache of its own, empty
    assert cache.parent == tmp_path and not cache.exists()
    streams = test_time.cpu_by(
        {"tests/training/test_gpu_bench.py::t": 1.0, "tests/training/test_x.py::t": 2.0,
         "tests/training/test_y.py::t": 3.0, "tests/jobs/test_z.py::t": 4.0}, test_time.stream_of,
    )  # fmt: skip
    assert streams == {"kit": 1.0, "training": 5.0, "operator": 4.0}
