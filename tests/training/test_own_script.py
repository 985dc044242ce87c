"""Users' own Horovod scripts through `azdl train --script` (2 real workers), the command a
`--script` job runs on each node (run here under plain mpirun, with its pip step), and the
segmentation example: learning, identical weights on every rank, resume, clear errors."""

import argparse
import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from azdl.envs import PACKAGES_ROOT, training_env
from azdl.errors import AzdlError

EXAMPLE = PACKAGES_ROOT / "examples" / "segmentation"
sys.path.insert(0, str(EXAMPLE))
import make_tiles  # noqa: E402
import prepare_tiles  # noqa: E402
import tiles  # noqa: E402

# As a user writes them, after Horovod's own examples: nothing from this project.
KERAS_USER_SCRIPT = """\
import argparse, os
import numpy as np
import tensorflow as tf
import horovod.tensorflow.keras as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--model-out", required=True)
args = parser.parse_args()
hvd.init()
rng = np.random.default_rng(hvd.rank())
x = rng.normal(size=(128, 8)).astype("float32")
y = (x.sum(axis=1) > 0).astype("int64")
model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.Dense(2)])
opt = hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.05 * hvd.size()))
model.compile(opt, tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
history = model.fit(x, y, batch_size=32, epochs=args.epochs, verbose=0,
                    callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
total = float(sum(float(np.sum(w)) for w in model.get_weights()))
print(f"user-script rank {hvd.rank()} of {hvd.size()} epochs {len(history.history['loss'])} "
      f"weights {total:.6f}", flush=True)
if hvd.rank() == 0:
    model.save_weights(os.path.join(args.model_out, "model.h5"))
"""
TORCH_USER_SCRIPT = """\
import argparse, os, sys
import torch
import horovod.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--model-out", required=True)
parser.add_argument("--fail-on-rank", type=int, default=-1)
args = parser.parse_args()
hvd.init()
if hvd.rank() == args.fail_on_rank:
    print(f"rank {hvd.rank()} fails on purpose", file=sys.stderr, flush=True)
    sys.exit(3)
torch.manual_seed(hvd.rank())
model = torch.nn.Linear(4, 1)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                               named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
for _ in range(args.steps):
    x = torch.randn(16, 4)
    loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
total = float(sum(p.sum() for p in model.parameters()))
print(f"user-script rank {hvd.rank()} of {hvd.size()} steps {args.steps} weights {total:.6f}",
      flush=True)
if hvd.rank() == 0:
    torch.save(model.state_dict(), os.path.join(args.model_out, "model.pt"))
"""


def azdl(*args, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """The `azdl` command as a user runs it (the operator environment's CLI)."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {
        "PYTHONPATH": str(PACKAGES_ROOT)  # this checkout's code
    }
    return subprocess.run(
        [str(PACKAGES_ROOT / ".venv" / "bin" / "python"), "-m", "azdl", *map(str, args)],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=timeout,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "source", "args", "saved"),
    [
        ("keras_user.py", KERAS_USER_SCRIPT, ["--epochs", "2"], "model.h5"),
        ("torch_user.py", TORCH_USER_SCRIPT, ["--steps", "3"], "model.pt"),
    ],
)
def test_a_users_horovod_script_runs_unchanged_on_two_workers(tmp_path, name, source, args, saved):
    (tmp_path / name).write_text(source)
    run = azdl("train", "--script", name, "--workers", 2, "--", *args,
               "--model-out", "{output_dir}", cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stdout
    lines = re.findall(r"user-script rank (\d) of (\d) \S+ (\d+) weights (\S+)", run.stdout)
    assert sorted(rank for rank, *_ in lines) == ["0", "1"], run.stdout
    assert {(size, count) for _, size, count, _ in lines} == {("2", args[1])}
    assert len({weights for *_, weights in lines}) == 1  # synchronous: the same weights
    (run_dir,) = (tmp_path / "runs").iterdir()  # {output_dir} became this run's folder
    assert (run_dir / "outputs" / saved).is_file()


@pytest.mark.slow
def test_a_failing_worker_fails_the_run_with_its_message(tmp_path):
    (tmp_path / "user.py").write_text(TORCH_USER_SCRIPT)
    run = azdl("train", "--script", "user.py", "--transport", "mpi", "--",
               "--model-out", ".", "--fail-on-rank", "1", cwd=tmp_path)  # fmt: skip
    assert run.returncode != 0
    assert "rank 1 fails on purpose" in run.stdout


def build_wheel(folder: Path, name: str, version: str, source: str) -> Path:
    """A pure-Python wheel (PEP 427 layout, RECORD with hashes), as a private registry serves."""
    files = {
        f"{name}/__init__.py": source.encode(),
        f"{name}-{version}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        ).encode(),
        f"{name}-{version}.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: azdl-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }

    def digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = [f"{path},sha256={digest(data)},{len(data)}" for path, data in files.items()]
    record.append(f"{name}-{version}.dist-info/RECORD,,")
    files[f"{name}-{version}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return wheel


def _mount(folder: Path, shards: int) -> Path:
    """Shard-named files with a manifest of their sizes and digests: what the data container's
    mount holds for `--storage copy`."""
    from training.data.prepare.manifest import Manifest, ShardEntry, SplitSummary, file_digests

    folder.mkdir(parents=True)
    entries = []
    for i in range(shards):
        path = folder / f"train-{i:05d}-of-{shards:05d}"
        path.write_bytes(os.urandom(100 + i))
        entries.append(ShardEntry(path.name, "train", 1, *file_digests(path)))
    Manifest({"n1": 0}, {"train": SplitSummary(shards, shards, {"n1": shards})}, entries).write(
        folder
    )
    return folder


@pytest.mark.slow
def test_an_exported_script_job_runs_as_a_node_beside_the_users_own_training_package(tmp_path):
    """`azdl submit --script --export` as a user runs it, for a code folder with a top-level
    `training/` package of its own (issue 35, trap D), then the command of the exported YAML
    run as one node with two MPI processes, in the code folder as Azure ML runs it: pip
    installs a private package's wheel once (no index, no credentials), each process copies its
    node's shards (--storage copy) and runs under the guard, all three azdl's own modules, and
    the script imports the user's own `training` package and the wheel's."""
    code = tmp_path / "project"
    build_wheel(code / "wheels", "teamutils", "1.0", "ANSWER = 42\n")
    (code / "requirements.txt").write_text("teamutils==1.0\n")
    (code / "training").mkdir()
    (code / "training" / "__init__.py").write_text("")
    (code / "training" / "model.py").write_text('WHOSE = "the user\'s own"\n')
    (code / "train.py").write_text(textwrap.dedent("""\
        import os, sys
        import teamutils
        from training.model import WHOSE
        rank = os.environ["OMPI_COMM_WORLD_RANK"]  # Open MPI's, as Azure ML's mpirun sets it
        shards = sorted(n for n in os.listdir(os.environ["AZDL_DATA_DIR"]) if "-of-" in n)
        print(f"job rank {rank} {WHOSE} training package, answer {teamutils.ANSWER}, "
              f"args {sys.argv[1:]}, out {os.environ['AZDL_OUTPUT_DIR']}, shards {shards}",
              flush=True)
    """))  # fmt: skip
    outputs = json.loads((PACKAGES_ROOT / "docs" / "stack-outputs.example.json").read_text())
    outputs |= {"clusterVmSize": "Standard_D4s_v3", "gpusPerNode": 0}  # a CPU size: no NCCL
    (tmp_path / "outputs.json").write_text(json.dumps(outputs))
    export = azdl("submit", "--outputs", tmp_path / "outputs.json", "--script", code / "train.py",
                  "--framework", "torch",
                  "--requirements", code / "requirements.txt", "--wheels", code / "wheels",
                  "--storage", "copy", "--local-dir", tmp_path / "local", "--name", "r1",
                  "--export", tmp_path / "job.yml", "--", "--epochs", "2", "--out={output_dir}/m",
                  cwd=tmp_path)  # fmt: skip
    assert export.returncode == 0, export.stdout
    job = yaml.safe_load((tmp_path / "job.yml").read_text())
    assert job["distribution"] == {"type": "mpi", "process_count_per_instance": 1}
    command = job["command"]
    # What Azure ML does before the command runs: its ${{...}} placeholders become folders.
    folders = {"inputs.data": _mount(tmp_path / "data", 2),
               "outputs.checkpoints": tmp_path / "ckpt", "outputs.logs": tmp_path / "logs",
               "outputs.outputs": tmp_path / "out"}  # fmt: skip
    for key, folder in folders.items():
        folder.mkdir(exist_ok=True)
        command = command.replace("${{" + key + "}}", str(folder))
    assert "${{" not in command
    site = tmp_path / "site"  # the image's environment stands in as a --target folder here
    env = training_env({
        **job["environment_variables"], "PIP_TARGET": str(site), "TMPDIR": str(tmp_path),
        "PYTHONPATH": f"{site}{os.pathsep}{training_env()['PYTHONPATH']}",
        "PIP_NO_INDEX": "1", "AZUREML_RUN_ID": "r1",
    })  # fmt: skip
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    exported = ["PATH", "PYTHONPATH", "PIP_TARGET", "TMPDIR", "PIP_NO_INDEX", "AZUREML_RUN_ID",
                *job["environment_variables"]]  # fmt: skip
    mpirun = ["mpirun", *root, "--oversubscribe", "-np", "2", "--bind-to", "none",
              *(x for name in exported for x in ("-x", name))]  # fmt: skip
    run = subprocess.run([*mpirun, "bash", "-c", command], cwd=code, env=env, timeout=240,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    assert run.returncode == 0, run.stdout
    assert run.stdout.count("Successfully installed teamutils-1.0") == 1  # once per node
    for rank in (0, 1):
        assert (
            f"job rank {rank} the user's own training package, answer 42, args ['--epochs', "
            f"'2', '--out={tmp_path}/out/m'], out {tmp_path}/out, shards "
            "['train-00000-of-00002', 'train-00001-of-00002']"
        ) in run.stdout, run.stdout
    assert sorted(p.name for p in (tmp_path / "logs" / "ranks").iterdir()) == [
        "exit-0-round-0.json", "exit-1-round-0.json", "rank-0.json", "rank-1.json",
    ]  # the guard's records: each rank's host at its start, its exit record at its end  # fmt: skip


@pytest.mark.slow
def test_a_local_run_under_the_guard_beside_the_users_own_training_package(tmp_path):
    """`azdl train --script` from a folder with a top-level `training/` package of its own
    (issue 35, trap D): the guard (--progress-timeout), azdl's, runs in that folder, and the
    script finds the user's package."""
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "__init__.py").write_text('WHOSE = "the user\'s own"\n')
    (tmp_path / "train.py").write_text(
        "import os\nfrom training import WHOSE\n"
        "print(f\"rank {os.environ['RANK']}: {WHOSE} training package\", flush=True)\n"
    )
    run = azdl("train", "--script", "train.py", "--launcher", "torchrun", "--workers", 2,
               "--progress-timeout", 60, "--run-dir", tmp_path / "run", cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stdout
    assert "-c import runpy" in run.stdout.replace("'", "")  # the guard, off the working folder
    for rank in (0, 1):
        assert f"rank {rank}: the user's own training package" in run.stdout, run.stdout
    assert sorted(p.name for p in (tmp_path / "run" / "ranks").iterdir()) == [
        "exit-0-round-0.json", "exit-1-round-0.json", "rank-0.json", "rank-1.json",
    ]  # the guard's records: each rank's host at its start, its exit record at its end  # fmt: skip


# ---- the segmentation example --------------------------------------------------------------

CLASSES = ",".join(make_tiles.CLASSES)


@pytest.fixture(scope="module")
def landcover(tmp_path_factory):
    """Generated scenes (RGB+NIR, 4 classes) cut into 64 px tiles, 4 shards per split."""
    root = tmp_path_factory.mktemp("landcover")
    assert make_tiles.main(["--out", str(root / "scenes"), "--scenes", "10", "--size", "128"]) == 0
    code = prepare_tiles.main(["--images", str(root / "scenes" / "images"),
                               "--masks", str(root / "scenes" / "masks"),
                               "--out", str(root / "data"), "--classes", CLASSES,
                               "--tile-size", "64", "--shards", "4"])  # fmt: skip
    assert code == 0
    return root / "data"


def test_prepared_tiles_are_platform_shards_with_a_manifest_the_stager_accepts(landcover):
    from training.data.prepare.manifest import file_md5, load_manifest
    from training.data.shards import list_shards

    manifest = load_manifest(landcover)  # the loader `azdl data stage` and the copy step use
    assert manifest.splits["train"].num_examples == 32  # 8 scenes x 4 tiles of 64 px
    assert manifest.splits["validation"].num_examples == 8  # whole scenes: 2 of 10
    assert len(list_shards(landcover, "train")) == 4  # the platform's shard names
    for entry in manifest.shards:
        assert file_md5(landcover / entry.name) == entry.md5
    assert manifest.label_map == {name: i for i, name in enumerate(make_tiles.CLASSES)}
    image, mask = next(tiles.read_shard(landcover / "train-00000-of-00004", 4))
    assert image.shape == (64, 64, 4) and mask.shape == (64, 64) and mask.max() < 4


STEPS = 8  # per epoch: 2 epochs of 8 steps, 8 tiles per worker and step, Adam at 3e-3 per worker


@pytest.mark.slow
def test_segmentation_learns_above_chance_on_two_workers_in_sync_and_resumes(landcover, tmp_path):
    script = EXAMPLE / "train_segmentation.py"
    run_dir = tmp_path / "seg"  # checkpoints/, logs/, outputs/ (AZDL_*_DIR)
    common = ["--steps-per-epoch", STEPS, "--batch-size", 8, "--width", 8, "--lr", 0.003]
    run = azdl("train", "--script", script, "--workers", 2, "--data", landcover,
               "--run-dir", run_dir, "--", "--epochs", 2, *common, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stdout
    mean_iou = [float(x) for x in re.findall(r"mean IoU: ([0-9.]+)", run.stdout)]
    assert len(mean_iou) == 2
    # Chance for 4 classes: a uniform random guess scores IoU 1/7 per class (0.14); always
    # answering the commonest class scores at most 1/4 mean IoU.
    assert mean_iou[-1] > 0.5, run.stdout  # twice the best trivial answer
    digests = re.findall(r"rank (\d): weights ([0-9a-f]{16})", run.stdout)
    assert sorted(r for r, _ in digests) == ["0", "1"] and len({d for _, d in digests}) == 1
    checkpoints = run_dir / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        "checkpoint-0000.pt", "checkpoint-0001.pt"
    ]  # fmt: skip
    metrics = json.loads((run_dir / "outputs" / "metrics.json").read_text())
    assert metrics["mean_iou"] == pytest.approx(mean_iou[-1], abs=1e-4)
    assert metrics["classes"] == list(make_tiles.CLASSES)
    assert len((run_dir / "logs" / "metrics.jsonl").read_text().splitlines()) == 2

    # Resume, under plain mpirun this time: the third epoch only, from the second's checkpoint.
    run = azdl("train", "--script", script, "--workers", 2, "--transport", "mpi",
               "--data", landcover, "--run-dir", run_dir, "--", "--epochs", 3, *common,
               cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stdout
    assert f"resuming from {checkpoints}/checkpoint-0001.pt at epoch 3" in run.stdout
    assert re.findall(r"epoch (\d)/3", run.stdout) == ["3"]
    digests = re.findall(r"rank (\d): weights ([0-9a-f]{16})", run.stdout)
    assert len(digests) == 2 and len({d for _, d in digests}) == 1


def write_pair(folder: Path, stem: str, image: np.ndarray, mask: np.ndarray) -> None:
    from PIL import Image

    for sub in ("images", "masks"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    Image.fromarray(image).save(folder / "images" / f"{stem}.png")
    Image.fromarray(mask).save(folder / "masks" / f"{stem}.png")


@pytest.mark.parametrize(
    ("mask_shape", "mask_value", "message"),
    [
        ((64, 60), 1, "masks/bad.png: mask is 64x60 pixels but its image is 64x64"),
        ((64, 64), 4, "masks/bad.png: mask has class id(s) 4 at 1 pixel(s); allowed: 0..3"),
    ],
)
def test_bad_pairs_stop_prepare_naming_the_file(tmp_path, capsys, mask_shape, mask_value, message):
    rng = np.random.default_rng(0)
    write_pair(
        tmp_path, "good", rng.integers(0, 255, (64, 64, 3), np.uint8), np.ones((64, 64), np.uint8)
    )
    mask = np.zeros(mask_shape, np.uint8)
    mask[0, 0] = mask_value
    write_pair(tmp_path, "bad", rng.integers(0, 255, (64, 64, 3), np.uint8), mask)
    code = prepare_tiles.main(["--images", str(tmp_path / "images"), "--masks",
                               str(tmp_path / "masks"), "--out", str(tmp_path / "out"),
                               "--classes", CLASSES, "--tile-size", "32"])  # fmt: skip
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # everything is checked before anything is written


@pytest.mark.slow
def test_a_bad_tile_in_a_shard_stops_training_naming_the_shard_and_tile(tmp_path):
    """Shards made elsewhere are checked as they are read: here a class id beyond the count."""
    data = tmp_path / "data"
    data.mkdir()
    good = tiles.encode_tile(np.zeros((32, 32, 3), np.uint8), np.ones((32, 32), np.uint8))
    bad_mask = np.ones((32, 32), np.uint8)
    bad_mask[5, 5] = 9
    bad = tiles.encode_tile(np.zeros((32, 32, 3), np.uint8), bad_mask)
    tiles.write_shard(data / "train-00000-of-00001", [("ok", good), ("scene7_0_32", bad)])
    run = subprocess.run(
        [sys.executable, str(EXAMPLE / "train_segmentation.py"), "--data-dir", str(data),
         "--num-classes", "4", "--epochs", "1", "--steps-per-epoch", "1", "--batch-size", "2",
         "--shuffle-buffer", "1", "--checkpoint-dir", str(tmp_path / "c"),
         "--output-dir", str(tmp_path / "o")],
        cwd=tmp_path, env=training_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2, run.stdout
    assert (
        f"error: {data}/train-00000-of-00001:scene7_0_32.npz: mask has class id(s) 9" in run.stdout
    )


def test_local_script_runs_get_their_folders_as_variables_and_placeholders(tmp_path, monkeypatch):
    from azdl import local

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    data = tmp_path / "tiles"
    data.mkdir()
    args, env = local.script_run(
        tmp_path / "t.py", 2, str(data), ["--in={data_dir}/a", "{output_dir}", "{x}"],
        tmp_path / "run",
    )  # fmt: skip
    assert args == [f"--in={data}/a", f"{tmp_path}/run/outputs", "{x}"]  # others left alone
    assert env["AZDL_DATA_DIR"] == str(data)
    assert env["AZDL_CHECKPOINT_DIR"] == f"{tmp_path}/run/checkpoints"
    assert (tmp_path / "run" / "logs").is_dir()
    assert env["OMP_NUM_THREADS"] == env["AZDL_THREADS"] == str(max(1, os.cpu_count() // 2))
    with pytest.raises(AzdlError, match=r"use \{data_dir\}, but this run has no such folder"):
        local.script_run(tmp_path / "t.py", 2, None, ["{data_dir}"], tmp_path / "run")
    cmd = local.launch_command(
        "", 2, "horovod", ["--a"], script=tmp_path / "t.py", exports=tuple(env), transport="mpi"
    )
    assert cmd[-2:] == [str(tmp_path / "t.py"), "--a"]
    assert cmd[cmd.index("AZDL_OUTPUT_DIR") - 1] == "-x"  # mpirun hands it to the workers


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--script", "nope.py"], "--script nope.py: no such file"),
        (["--script", "t.py", "--framework", "torch"], "leave it out with --script"),
        (["--data", "."], "--data and --run-dir go with --script"),
        (["--run-dir", "."], "--data and --run-dir go with --script"),
        (["--script", "t.py", "--data", "missing"], "--data missing: no such folder"),
    ],
)
def test_bad_local_script_options_are_clear_errors(tmp_path, monkeypatch, capsys, argv, message):
    from azdl.commands import train

    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text("import horovod.torch\n")
    parser = argparse.ArgumentParser(prog="azdl")
    train.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["train", *argv])
    with pytest.raises(AzdlError, match=re.escape(message)):
        args.func(args)


def test_four_band_npy_pairs_the_real_imagery_route_become_tiles(tmp_path):
    """NAIP-like input: 4-band uint8 .npy images and .npy masks with no-data pixels (255)."""
    rng = np.random.default_rng(1)
    for sub in ("images", "masks"):
        (tmp_path / sub).mkdir()
    for stem in ("m_1", "m_2"):
        mask = rng.integers(0, 6, (96, 80), np.uint8)
        mask[:10] = tiles.IGNORE
        np.save(tmp_path / "images" / f"{stem}.npy", rng.integers(0, 255, (96, 80, 4), np.uint8))
        np.save(tmp_path / "masks" / f"{stem}.npy", mask)
    code = prepare_tiles.main(["--images", str(tmp_path / "images"), "--masks",
                               str(tmp_path / "masks"), "--out", str(tmp_path / "out"),
                               "--classes", "a,b,c,d,e,f", "--tile-size", "32",
                               "--shards", "1"])  # fmt: skip
    assert code == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["options"]["bands"] == 4 and manifest["options"]["num_classes"] == 6
    assert manifest["splits"]["train"]["num_examples"] == 6  # 3 x 2 whole 32 px tiles of 96x80
    (shard,) = tiles.list_shards(tmp_path / "out", "train")
    image, mask = next(tiles.read_shard(shard, 6))
    assert image.shape == (32, 32, 4) and (mask == tiles.IGNORE).any()
