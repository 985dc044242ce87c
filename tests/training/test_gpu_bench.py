"""The GPU benchmark's scripts (benchmarks/gpu/), as far as a machine without a GPU can check
them: P3's CPU mode on real TFRecords, its options, the runs run.sh asks for, the report."""

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import write_tiny_tfrecords

from azdl.envs import REPO_ROOT, training_env

GPU = Path(REPO_ROOT) / "benchmarks" / "gpu"
sys.path.insert(0, str(GPU))

import p3_report  # noqa: E402
import p3_resnet50  # noqa: E402


@pytest.mark.slow
def test_p3_runs_the_flavour_with_horovod_on_tfrecords_in_cpu_mode(tmp_path):
    data = write_tiny_tfrecords(tmp_path / "data", per_shard=8)
    argv = [
        "--device",
        "cpu",
        "--model",
        "tiny",
        "--image-size",
        "32",
        "--batch-size",
        "4",
        "--precision",
        "fp32",
        "--data",
        "real",
        "--data-dir",
        str(data),
        "--decode",
        "cpu",
        "--data-workers",
        "1",
        "--warmup",
        "2",
        "--steps",
        "3",
    ]
    result = subprocess.run(
        [sys.executable, str(GPU / "p3_resnet50.py"), *argv],
        cwd=REPO_ROOT,
        env=training_env({"TF_CPP_MIN_LOG_LEVEL": "2"}),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout.strip().splitlines()[-1])
    assert row["horovod"] and row["data"] == "real" and row["data_workers"] == 1
    assert row["images_per_sec"] > 0 and row["timed_steps"] == 3 and row["device"] == "cpu"


def test_every_run_in_run_sh_is_a_valid_p3_command_line():
    script = (GPU / "run.sh").read_text()
    block = re.search(r"^runs=\(\n(.*?)^\)", script, re.M | re.S).group(1)
    lines = re.findall(r'^\s*"(.*)"$', block, re.M)
    assert len(lines) >= 4
    labels = set()
    for line in lines:
        line = line.replace("${horovod[*]}", "").replace("$carry", ".gpu-carry")
        line = line.replace("$((cores - 1))", "15")
        args = p3_resnet50.parse(shlex.split(line))
        labels.add(args.label)
        assert (args.model, args.image_size, args.batch_size) == ("resnet50", 224, 256)
        assert args.precision == "bf16" and args.channels_last
    assert {"synthetic", "real-gpu-decode", "real-cpu-decode"} <= labels
    assert "bash training/install/build_horovod.sh" in script
    assert "HOROVOD_GPU_OPERATIONS=NCCL" in script and "HOROVOD_WITH_PYTORCH=1" in script
    assert subprocess.run(["bash", "-n", str(GPU / "run.sh")]).returncode == 0
    assert subprocess.run(["bash", "-n", str(GPU / "prep.sh")]).returncode == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--weights-channels-last"], "needs --no-horovod"),
        (["--data", "real"], "--data real needs --data-dir"),
        (["--data", "real", "--data-dir", "x", "--device", "cpu"], "--decode gpu needs"),
    ],
)
def test_p3_refuses_impossible_combinations(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        p3_resnet50.parse(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_kernel_time_counts_overlapping_kernels_once():
    def event(kind, start, end):
        return SimpleNamespace(
            device_type=SimpleNamespace(name=kind), time_range=SimpleNamespace(start=start, end=end)
        )

    events = [
        event("CUDA", 0, 40),
        event("CUDA", 30, 50),
        event("CPU", 0, 100),
        event("CUDA", 45, 48),
        event("CUDA", 80, 90),
    ]
    profiler = SimpleNamespace(events=lambda: events)
    assert p3_resnet50.kernel_share(profiler, 100.0) == pytest.approx(0.6)


def test_p3_report_compares_with_the_synthetic_run_of_the_same_session(tmp_path):
    common = {
        "device": "NVIDIA H100 80GB HBM3",
        "torch": "2.11.0",
        "image_size": 224,
        "batch": 256,
        "precision": "bf16",
        "horovod": True,
        "compile": False,
        "weights_channels_last": False,
        "kernel_time_share": 0.9,
    }
    rows = [
        {**common, "label": "synthetic", "data": "synthetic", "images_per_sec": 3200.0},
        {**common, "label": "real-gpu-decode", "data": "real", "images_per_sec": 2800.0},
    ]
    (tmp_path / "p3.jsonl").write_text("\n".join(map(json.dumps, rows)))
    p3_report.main([str(tmp_path / "p3.jsonl"), "--command", "cmd", "--results", str(tmp_path)])
    md = (tmp_path / "p3_gpu.md").read_text()
    assert "| synthetic | yes | no | no | 3,200 | 1.00× | 90% |" in md
    assert "3,200, met." in md and "0.88×, NOT met." in md
    assert json.loads((tmp_path / "p3_gpu.json").read_text())["command"] == "cmd"
