"""The GPU benchmark's scripts (benchmarks/gpu/), as far as a machine without a GPU can check
them: the whole one-command kit through `run.sh --smoke` (a fresh environment with the images'
build tools and the pinned CPU torch, linked from the training environment; every P3 variant on
CPU; then the Horovod wheel the training environment's set-up built, installed and checked as a
GPU run installs its own, and its row)
in a copy of the repository without .git; a wheel from another recipe is refused; a failed
variant is listed and the next one runs; a failed Horovod build (built from the carried source
with the pinned CMake) is listed and the rows before it stay; a budget too small skips what it
cannot cover; P3's CPU mode on real TFRecords, its options, the runs run.sh asks for, the
report."""

import filecmp
import json
import re
import shlex
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

import pytest

from azdl.envs import PACKAGES_ROOT, VENV_NAME, training_env

GPU = Path(PACKAGES_ROOT) / "benchmarks" / "gpu"
sys.path.insert(0, str(GPU))

import link_pins  # noqa: E402
import p3_report  # noqa: E402
import p3_resnet50  # noqa: E402

NO_BUILD = (
    "eager-fp32",
    "channels-last-fp32",
    "synthetic",
    "synthetic-compile",
    "real-gpu-decode",
    "real-cpu-decode",
    "ddp-1-process",
)
ON_CPU = tuple(label for label in NO_BUILD if label != "real-gpu-decode")  # the smoke runs these
HOROVOD_ROW = "horovod-1-worker-no-hooks"


def _kit(repo: Path, *argv, timeout: int) -> subprocess.CompletedProcess:
    """run.sh in `repo`, with torch.compile's kernel cache in a folder of its own beside it
    (empty at first, as on a CI machine)."""
    return subprocess.run(
        ["bash", "benchmarks/gpu/run.sh", *map(str, argv)],
        cwd=repo,
        env=training_env({"TORCHINDUCTOR_CACHE_DIR": str(repo.parent / "inductor")}),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """`run.sh --smoke` in a copy of the repository's tracked files with no .git at all (as a
    tarball or a copy to a GPU machine has it), beside the training environment that `make
    setup` made (.venv-train, linked)."""
    root = tmp_path_factory.mktemp("kit")
    repo = root / "repo"
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=PACKAGES_ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = Path(PACKAGES_ROOT) / name
        if source.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    (repo / VENV_NAME).symlink_to(PACKAGES_ROOT / VENV_NAME)
    proc = _kit(repo, "--smoke", root / "smoke", timeout=1800)
    return repo, root / "smoke", proc


@pytest.mark.slow
def test_one_command_runs_every_variant_then_the_horovod_row_on_the_set_up_build(smoke):
    repo, out, proc = smoke
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    assert "smoke run passed" in proc.stdout
    # What needs no build first, Horovod last: set-up's wheel, not a second build.
    order = [m.group(1) for m in re.finditer(r"p3_resnet50\.py --label (\S+)", proc.stdout)]
    assert order == [*ON_CPU, HOROVOD_ROW]
    assert proc.stdout.index("--label ddp-1-process") < proc.stdout.index("Horovod: the wheel")
    assert "building Horovod" not in proc.stdout
    # torch's build read from its version.py, not imported; the images' setuptools and wheel.
    steps = (repo / "training" / "install" / "image-steps.sh").read_text()
    pins = {name: re.search(rf"^{name.upper()}_VERSION=(\S+)$", steps, re.M)[1]
            for name in ("setuptools", "wheel")}  # fmt: skip
    machine = (out / "out" / "machine.txt").read_text().splitlines()
    assert machine[0] == f"python {sys.version.split()[0]} torch {version('torch')} cuda None"
    assert f"setuptools {pins['setuptools']}" in machine and f"wheel {pins['wheel']}" in machine
    (linked,) = re.findall(r"^linked from .*", proc.stdout, re.M)
    assert f"torch {version('torch')}," in linked and f"numpy {version('numpy')}," in linked
    assert "was built from this tree's recipe" in proc.stdout
    wheel = re.search(r"Horovod installed in \S+/kit/site from (\S+\.whl)", proc.stdout)
    assert wheel and wheel[1].startswith(f"{repo}/.venv-train/horovod-wheel/horovod-0.28.1-")
    assert re.search(r"distutils from \S+/setuptools/_distutils/__init__\.py", proc.stdout)
    check = (out / "out" / "horovod-build.txt").read_text()
    assert f"in {out}/kit/site, PyTorch extension loaded; built with: Gloo yes, NCCL no" in check
    report = json.loads((out / "results" / "p3_gpu.json").read_text())
    assert report["benchmark"] == "p3_gpu_smoke" and report["failed"] == report["skipped"] == []
    # The GPU-decode variant, which on a CPU would decode on the CPU, is listed, not run.
    assert [r["label"] for r in report["gpu_only"]] == ["real-gpu-decode"]
    assert report["budget_s"] is None  # no time budget unless one is asked for
    rows = {row["label"]: row for row in report["rows"]}
    assert list(rows) == [*ON_CPU, HOROVOD_ROW]
    workers = {label: row["workers"] for label, row in rows.items()}
    assert workers == {**dict.fromkeys(ON_CPU, "one"), "ddp-1-process": "ddp",
                       HOROVOD_ROW: "horovod"}  # fmt: skip
    for row in rows.values():
        assert row["timed_steps"] == 2 and row["device"] == "cpu" and row["images_per_sec"] > 0
        assert row["sync_debug"] is False  # the sync check needs CUDA: the smoke drops it
    assert rows["real-cpu-decode"]["data"] == "real"
    # Compiled with no kernels generated on the CPU (run.sh's TORCH_COMPILE_OVERRIDE_BACKENDS):
    # none in the cache.
    compiled = rows["synthetic-compile"]
    assert compiled["compile"] and compiled["backend_override"] == ">=0:aot_eager"
    assert not [path for path in (repo.parent / "inductor").rglob("*") if path.is_file()]
    assert not rows["eager-fp32"]["channels_last"]
    md = (out / "results" / "p3_gpu.md").read_text()
    assert md.startswith("SMOKE RUN on CPU") and "budget" not in md
    assert "Horovod, 1 worker: no hooks, plain PyTorch under hvd.init" in md
    assert "| yes, backends >=0:aot_eager |" in md and "| no |" in md
    assert "| real-gpu-decode | GPU ONLY: decodes on the GPU (nvJPEG); on a CPU" in md
    # The smoke run's report stays in its own folder: the repository's results are untouched.
    results = Path(PACKAGES_ROOT) / "benchmarks" / "results"
    for name in ("p3_gpu.md", "p3_gpu.json"):
        original, copy = results / name, repo / "benchmarks" / "results" / name
        assert copy.exists() == original.exists()
        assert not copy.exists() or filecmp.cmp(copy, original, shallow=False)


@pytest.mark.slow
def test_a_budget_too_small_skips_each_step_and_says_so(smoke):
    repo, out, _ = smoke
    run = _kit(repo, "--smoke", out, "--budget", 30, "measure", timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "p3_resnet50.py --label" not in run.stdout  # nothing started
    report = json.loads((out / "results" / "p3_gpu.json").read_text())
    assert report["rows"] == [] and report["budget_s"] == 30
    assert [r["label"] for r in report["skipped"]] == list(NO_BUILD)
    assert "it needs 45 s" in report["skipped"][0]["skipped"]
    assert "| eager-fp32 | SKIPPED: " in (out / "results" / "p3_gpu.md").read_text()


@pytest.mark.slow
def test_a_variant_that_fails_is_reported_as_failed_and_the_others_stay(smoke):
    repo, out, _ = smoke
    data = out / "carry" / "data"
    data.rename(out / "data-aside")  # the real-data variants have nothing to read
    try:
        labels = ("real-cpu-decode", "ddp-1-process")  # a failure, then a run after it
        bench = _kit(repo, "--smoke", out, "measure", *labels, timeout=600)
    finally:
        (out / "data-aside").rename(data)
    assert bench.returncode == 1, bench.stdout + bench.stderr
    assert "carried wheels: installed in" in bench.stdout  # the full run's, same checksums
    report = json.loads((out / "results" / "p3_gpu.json").read_text())
    assert [r["label"] for r in report["failed"]] == ["real-cpu-decode"]
    assert [r["label"] for r in report["rows"]] == ["ddp-1-process"]
    md = (out / "results" / "p3_gpu.md").read_text()
    assert "| real-cpu-decode | FAILED: exit 1; log: real-cpu-decode.log |" in md
    # One line that names what is wrong, before torch is imported: no traceback.
    log = (out / "out" / "real-cpu-decode.log").read_text()
    assert (
        log == f"error: --data-dir '{out}/carry/data' is not a folder; allowed: a folder of "
        "TFRecord shards (benchmarks/gpu/prep.sh writes one into .gpu-carry/data)\n"
    )


@pytest.mark.slow
def test_a_horovod_wheel_from_another_recipe_is_refused(smoke):
    """The training environment's Horovod no longer matches the tree (planted: a changed
    build_horovod.sh): the rehearsal refuses it instead of vouching for a stale build."""
    repo, out, _ = smoke
    script = repo / "training" / "install" / "build_horovod.sh"
    text = script.read_text()
    script.write_text(text + "# changed\n")
    try:
        run = _kit(repo, "--smoke", out, "horovod", timeout=300)
    finally:
        script.write_text(text)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "was not built from this tree's recipe" in run.stderr
    assert "p3_resnet50.py --label" not in run.stdout
    report = json.loads((out / "results" / "p3_gpu.json").read_text())
    assert [r["label"] for r in report["failed"]] == [HOROVOD_ROW]


@pytest.mark.slow
def test_a_failed_horovod_build_is_listed_and_stops_nothing_before_it(smoke):
    """The kit's own build (--build-horovod: from the carried source, with the carried cmake at
    build_horovod.sh's pin) and the fault CMake 4 brings, planted: build_horovod.sh without
    CMAKE_POLICY_VERSION_MINIMUM."""
    repo, out, _ = smoke
    script = repo / "training" / "install" / "build_horovod.sh"
    text = script.read_text()
    cmake = re.search(r"^CMAKE_VERSION=(\S+)$", text, re.M)[1]
    planted = re.sub(r"^export CMAKE_POLICY_VERSION_MINIMUM=.*$", "", text, flags=re.M)
    assert planted != text and cmake.startswith("4.")
    script.write_text(planted)
    try:
        build = _kit(repo, "--smoke", out, "--build-horovod", "horovod", timeout=900)
    finally:
        script.write_text(text)
    assert build.returncode == 1, build.stdout + build.stderr
    assert "Horovod did not build" in build.stderr
    log = (out / "out" / "build.log").read_text()
    assert f"building Horovod with cmake version {cmake} " in log
    # CMake 4's own words about the Gloo copy's cmake_minimum_required(VERSION 2.8.12).
    assert "Compatibility with CMake < 3.5 has been removed" in log
    report = json.loads((out / "results" / "p3_gpu.json").read_text())
    assert report["failed"] == [
        {"label": HOROVOD_ROW, "failed": "Horovod did not build; log: build.log"}
    ]


def test_the_images_stand_in_refuses_a_pin_the_training_environment_does_not_hold(tmp_path, capsys):
    assert link_pins.main(str(tmp_path), ["torch==2.0.0", f"numpy=={version('numpy')}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"torch {version('torch')}, pinned ==2.0.0" in err
    assert list(tmp_path.iterdir()) == []  # nothing linked


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run.sh", "--budget", "9m"], "--budget '9m'; allowed: whole seconds"),
        (["run.sh", "--build-horovod"], "--build-horovod is for --smoke"),
        (["run.sh", "horovod", "x"], "only 'measure' takes labels"),
        (["prep.sh", "--max-mib", "0"], "--max-mib '0'; allowed: a whole number of MiB"),
    ],
)
def test_the_kit_refuses_bad_options_in_one_line_before_doing_anything(argv, message, tmp_path):
    script, *args = argv
    run = subprocess.run(
        ["bash", str(GPU / script), *args],
        env={**training_env(), "GPU_CARRY": str(tmp_path / "carry"), "OUT": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.startswith("error: ") and message in run.stderr
    assert run.stderr.count("\n") == 1 and not (tmp_path / "carry").exists()


@pytest.mark.slow
def test_p3_runs_the_flavour_with_horovod_on_tfrecords_in_cpu_mode_and_leaves_no_thread(smoke):
    data = smoke[1] / "carry" / "data"  # prep.sh's, written by the data tool's converter
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
        "--workers",
        "horovod",
    ]
    result = subprocess.run(
        [sys.executable, str(GPU / "p3_resnet50.py"), *argv],
        cwd=PACKAGES_ROOT,
        env=training_env({"TF_CPP_MIN_LOG_LEVEL": "2"}),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout.strip().splitlines()[-1])
    assert row["workers"] == "horovod" and row["data"] == "real" and row["data_workers"] == 1
    assert row["images_per_sec"] > 0 and row["timed_steps"] == 3 and row["device"] == "cpu"


def _run_sh_variants() -> list[tuple[str, int, list[str]]]:
    """run.sh's `variant LABEL NEED ARGS...` lines, in order, as it passes them."""
    script = (GPU / "run.sh").read_text()
    calls = re.findall(r"^\s+variant (\S+) (\S+) (.*?)(?<!\\)$", script.replace("\\\n", " "), re.M)
    # The machine's values for run.sh's variables: the carried data, 16 cores.
    words = {'"$data"': ".gpu-carry/data", "$((cores - 1))": "15"}
    for name, value in words.items():
        calls = [(label, need, rest.replace(name, value)) for label, need, rest in calls]
    return [(label, need, shlex.split(rest)) for label, need, rest in calls]


def test_every_run_in_run_sh_is_a_valid_p3_command_line():
    variants = _run_sh_variants()
    assert [label for label, _, _ in variants] == [*NO_BUILD, HOROVOD_ROW]
    for label, need, argv in variants:
        args = p3_resnet50.parse(["--label", label, *argv])
        assert (args.model, args.image_size, args.batch_size) == ("resnet50", 224, 256)
        assert int(need) > 0
        # The synthetic rows prove no host sync per step; the real-data rows' loader thread
        # decodes and copies on its own stream, which the check (process-wide) would flag.
        assert args.sync_debug == (args.data == "synthetic"), label
    by_label = {label: p3_resnet50.parse(argv) for label, _, argv in variants}
    assert by_label["eager-fp32"].precision == "fp32" and not by_label["eager-fp32"].channels_last
    assert by_label["synthetic"].precision == "bf16" and by_label["synthetic"].channels_last
    assert by_label["synthetic-compile"].compile
    assert by_label["ddp-1-process"].workers == "ddp"
    assert by_label[HOROVOD_ROW].workers == "horovod"
    script = (GPU / "run.sh").read_text()
    assert "bash training/install/build_horovod.sh" in script
    assert "HOROVOD_GPU_OPERATIONS=NCCL" in script and "HOROVOD_WITH_PYTORCH=1" in script
    assert subprocess.run(["bash", "-n", str(GPU / "run.sh")]).returncode == 0
    assert subprocess.run(["bash", "-n", str(GPU / "prep.sh")]).returncode == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--weights-channels-last", "--workers", "horovod"], "needs --workers one or ddp"),
        (["--sync-debug", "--device", "cpu"], "--sync-debug needs --device cuda"),
        (["--data", "real"], "--data real needs --data-dir"),
        (["--data", "real", "--data-dir", "x", "--device", "cpu"], "--decode gpu needs"),
    ],
)
def test_p3_refuses_impossible_combinations(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        p3_resnet50.parse(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def _event(kind, start, end, stream=7):
    """A torch.profiler FunctionEvent's fields that kernel_share reads (device_resource_id:
    the CUDA stream of a device event, torch/autograd/profiler_util.py)."""
    return SimpleNamespace(
        device_type=SimpleNamespace(name=kind),
        time_range=SimpleNamespace(start=start, end=end),
        device_resource_id=stream,
    )


def test_kernel_time_counts_overlapping_kernels_once():
    events = [
        _event("CUDA", 0, 40),
        _event("CUDA", 30, 50),
        _event("CPU", 0, 100, stream=1234),
        _event("CUDA", 45, 48),
        _event("CUDA", 80, 90),
    ]
    profiler = SimpleNamespace(events=lambda: events)
    assert p3_resnet50.kernel_share(profiler, 100.0) == pytest.approx(0.6)


def test_kernel_time_counts_the_training_stream_only():
    """The decode stream's kernels fill the training stream's gaps: counting them would make
    a starved GPU look busy (0.9 here instead of 0.6)."""
    training = [_event("CUDA", 0, 40), _event("CUDA", 50, 70)]
    decode = [_event("CUDA", 40, 50, stream=21), _event("CUDA", 70, 90, stream=21)]
    profiler = SimpleNamespace(events=lambda: training + decode)
    assert p3_resnet50.kernel_share(profiler, 100.0) == pytest.approx(0.6)


def test_p3_report_compares_with_the_synthetic_run_of_the_same_session(tmp_path):
    common = {
        "model": "resnet50",
        "device": "NVIDIA H100 80GB HBM3",
        "torch": "2.11.0",
        "image_size": 224,
        "batch": 256,
        "precision": "bf16",
        "workers": "one",
        "sync_debug": True,
        "channels_last": True,
        "compile": False,
        "backend_override": None,
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
    assert (
        "| synthetic | one process | resnet50, 224, 256 | bf16 | images | no | yes | 3,200 | "
        "1.00× | 90% |" in md
    )
    assert "3,200, met." in md and "0.88×, NOT met." in md
    assert json.loads((tmp_path / "p3_gpu.json").read_text())["command"] == "cmd"

    # A variant that failed is listed as failed; a label run again counts with its last result.
    failed = {"label": "real-cpu-decode", "failed": "exit 124; log: real-cpu-decode.log"}
    again = {**rows[1], "images_per_sec": 3000.0}
    (tmp_path / "p3.jsonl").write_text("\n".join(map(json.dumps, [*rows, failed, again])))
    p3_report.main([str(tmp_path / "p3.jsonl"), "--command", "cmd", "--results", str(tmp_path)])
    md = (tmp_path / "p3_gpu.md").read_text()
    assert "| real-cpu-decode | FAILED: exit 124; log: real-cpu-decode.log |" in md
    assert "0.94×, met." in md and "0.88×" not in md
    report = json.loads((tmp_path / "p3_gpu.json").read_text())
    assert [r["label"] for r in report["failed"]] == ["real-cpu-decode"]

    # A step the budget could not cover is listed as skipped; the Horovod row says what it is.
    skipped = {"label": "horovod-1-worker-no-hooks", "skipped": "20 s left of the 540 s budget"}
    hvd_row = {**rows[0], "label": "again", "workers": "horovod"}
    (tmp_path / "p3.jsonl").write_text("\n".join(map(json.dumps, [*rows, hvd_row, skipped])))
    p3_report.main(
        [
            str(tmp_path / "p3.jsonl"),
            "--command",
            "c",
            "--results",
            str(tmp_path),
            "--budget",
            "540",
        ]
    )
    md = (tmp_path / "p3_gpu.md").read_text()
    assert "| horovod-1-worker-no-hooks | SKIPPED: 20 s left of the 540 s budget |" in md
    assert "| again | Horovod, 1 worker: no hooks, plain PyTorch under hvd.init |" in md
    assert "a budget of 540 s." in md

    # The CPU rehearsal says so and gives no verdict.
    p3_report.main(
        [str(tmp_path / "p3.jsonl"), "--command", "c", "--results", str(tmp_path), "--smoke"]
    )
    md = (tmp_path / "p3_gpu.md").read_text()
    assert md.startswith("SMOKE RUN on CPU") and "met" not in md
