"""The recipe through each flavour's command line, 2 real Horovod workers each.

Per TensorFlow flavour, one launch of 2 workers runs three command lines in a row (tests/
training/cli_runs.py: each through the script's `main(argv)`, the process start paid once; the
torch flavour, which shuts Horovod down after each run, one launch each). On synthetic
data, one optimizer step of ResNet50 v1.5 (32 px, 1,000 classes) with
a global batch of 8 images made up differently (Keras and PyTorch: 2 × batch 2 × 2 accumulated
micro-batches; the TF loop: 2 × batch 4), once with weight decay and once without:

- all three print the same recipe line: torchvision's 25,557,032 parameters in 161 tensors,
  decay on the 54 conv/fc kernels only;
- the kernels of all three have the same shapes (torch's layout transposed);
- the step runs at `--base-lr` (Goyal's warm-up starts at the base rate; the previous schedule
  started at peak / workers);
- decay on versus off changes every conv and fc kernel, by `lr · wd · w` (coupled decay), and
  leaves every batch-norm and bias tensor (and the batch-norm statistics) alike.

And the logged loss of the tiny model with `--label-smoothing 0.9` (learning rate 0) is
`(1 - ε) · CE + ε · mean_k(-log p_k)` of its logits, recomputed here from its dumped weights;
that run also takes `--recipe nvidia`, which every flavour's recipe line shows (the options
given on their own winning over it).
"""

import json
import re
import subprocess

import numpy as np
import pytest
from worker_runs import Run

from azdl.envs import PACKAGES_ROOT, training_bin, training_env
from azdl.launchers import local_horovodrun
from training.data import synthetic

pytestmark = pytest.mark.slow

FRAMEWORKS = ("keras", "tf", "torch")
# A small rate, so that one step's gradient moves the kernels less than the decay term shows.
BASE_LR, WD = 0.01, 0.5
EPS = 0.9  # large, so that the smoothed loss is far from plain cross-entropy
# 2 workers × 4 images = 8 per step, 4× --base-batch: peak 0.04, first step at the base rate.
GLOBAL = {"keras": ["--batch-size", 2, "--grad-accum", 2], "tf": ["--batch-size", 4]}
GLOBAL["torch"] = GLOBAL["keras"]
STEP = [
    "--model", "resnet50", "--image-size", 32, "--num-classes", 1000, "--epochs", 1,
    "--steps-per-epoch", 1, "--base-lr", BASE_LR, "--base-batch", 2, "--timing-warmup-steps", 0,
]  # fmt: skip


def _dump(directory) -> list[np.ndarray]:
    with np.load(directory / "rank-0.npz") as npz:
        return [npz[k] for k in npz.files]


def _recipe_line(output: str) -> str:
    (line,) = re.findall(r"Recipe: .*", output)
    return line


def _launch_runs(framework: str, runs: list[list]) -> list[Run]:
    """`runs` on 2 workers; rank 0's output of each. The TensorFlow flavours run them all in one
    horovodrun: their `hvd.init()` is done once per process (tf_worker.py), never shut down.
    The torch flavour shuts Horovod down at the end of each run (TorchHorovod.close), and a
    second `hvd.init` in the same processes raced the first's Gloo shutdown ("connect ...:
    Connection refused" in a cold make test at 27b3749): one horovodrun per run."""
    if framework == "torch":
        return [run for argv in runs for run in _launch(framework, [argv])]
    return _launch(framework, runs)


def _launch(framework: str, runs: list[list]) -> list[Run]:
    """2 workers run `runs` one after the other; rank 0's output of each, apart."""
    cmd = [
        *local_horovodrun(str(training_bin("python")), 2),
        str(training_bin("python")), "tests/training/cli_runs.py", framework,
        json.dumps([[str(a) for a in argv] for argv in runs]),
    ]  # fmt: skip
    proc = subprocess.run(
        cmd,
        cwd=PACKAGES_ROOT,
        env=training_env({"TF_CPP_MIN_LOG_LEVEL": "1"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout
    parts = re.split(r"^\[0\]<stdout>:=== run \d+ ===$", proc.stdout, flags=re.M)[1:]
    assert len(parts) == len(runs), proc.stdout
    return [Run(0, part) for part in parts]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("recipe")
    out = {}
    for framework in FRAMEWORKS:
        dumps = {wd: root / f"{framework}-wd-{wd}" for wd in (WD, 0)}
        runs = [[*STEP, *GLOBAL[framework], "--weight-decay", wd, "--dump-weights", dumps[wd]]
                for wd in (WD, 0)]  # fmt: skip
        tiny = root / f"{framework}-tiny"
        runs.append([
            "--model", "tiny", "--image-size", 32, "--num-classes", 4, "--batch-size", 8,
            "--epochs", 1, "--steps-per-epoch", 1, "--base-lr", 0, "--weight-decay", 0,
            "--label-smoothing", EPS, "--dump-weights", tiny, "--timing-warmup-steps", 0,
            "--recipe", "nvidia",
        ])  # fmt: skip
        decayed, plain, smoothed = _launch_runs(framework, runs)
        out[framework] = {
            "steps": {WD: (decayed, _dump(dumps[WD])), 0: (plain, _dump(dumps[0]))},
            "smoothed": (smoothed, tiny),
        }
    return out


def test_all_flavours_print_the_same_recipe_with_torchvisions_parameter_count(results):
    lines = {fw: _recipe_line(results[fw]["steps"][WD][0].output) for fw in FRAMEWORKS}
    assert len(set(lines.values())) == 1, lines
    line = lines["torch"]
    assert "resnet50, 25,557,032 trainable parameters in 161 tensors" in line
    assert f"weight decay {WD:g} on 54 kernels" in line and "the other 107 tensors" in line
    assert "label smoothing 0.1;" in line  # the default


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_flavour_takes_the_recipe_from_its_command_line(results, framework):
    default = _recipe_line(results[framework]["steps"][WD][0].output)
    assert default.startswith("Recipe: goyal, resnet50,")
    assert default.endswith("warm-up 5 epochs, step decay, momentum 0.9")
    nvidia = _recipe_line(results[framework]["smoothed"][0].output)
    assert nvidia.startswith("Recipe: nvidia, tiny,")
    assert nvidia.endswith("warm-up 8 epochs, cosine decay, momentum 0.875")
    assert f"label smoothing {EPS:g};" in nvidia  # given on its own, it wins over the recipe


def test_all_flavours_have_the_same_kernel_shapes(results):
    steps = {fw: results[fw]["steps"] for fw in FRAMEWORKS}

    def kernels(arrays, torch_layout):
        shapes = [a.shape for a in arrays if a.ndim >= 2]
        if torch_layout:  # (out, in, kh, kw) → (kh, kw, in, out); (out, in) → (in, out)
            shapes = [s[2:] + s[1::-1] if len(s) == 4 else s[::-1] for s in shapes]
        return shapes

    keras = kernels(steps["keras"][WD][1], False)
    assert len(keras) == 54
    assert keras == kernels(steps["tf"][WD][1], False)
    assert keras == kernels(steps["torch"][WD][1], True)  # in the same order, too


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_first_step_runs_at_the_base_rate(results, framework):
    for run, _ in results[framework]["steps"].values():
        assert run.metric("lr") == pytest.approx([BASE_LR]), run.output


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_weight_decay_changes_every_kernel_and_no_batch_norm_or_bias_tensor(results, framework):
    decayed, plain = results[framework]["steps"][WD][1], results[framework]["steps"][0][1]
    assert len(decayed) == len(plain)
    projections = []
    for with_wd, without in zip(decayed, plain, strict=True):
        if with_wd.ndim >= 2:  # conv and fc kernels
            difference = without - with_wd  # = lr · wd · w0 (coupled decay, first step)
            assert np.abs(difference).max() > 1e-4 * np.abs(without).max()
            projections.append((np.vdot(difference, without), np.vdot(without, without)))
        else:  # batch-norm γ/β and statistics, the fc bias, torch's batch counters
            np.testing.assert_allclose(with_wd, without, rtol=1e-6, atol=1e-7)
    assert len(projections) == 54
    shrink = sum(p for p, _ in projections) / sum(n for _, n in projections)
    assert shrink == pytest.approx(BASE_LR * WD, rel=0.1)


def _tiny_logits(framework, weights_dir, images):
    """The tiny model's logits with the weights a run dumped (lr 0: its initial weights)."""
    if framework == "torch":
        import torch

        from training.torch.torch_models import build_model

        model = build_model("tiny", 4)
        with np.load(weights_dir / "rank-0.npz") as npz:
            model.load_state_dict({k: torch.from_numpy(npz[k]) for k in npz.files})
        with torch.no_grad():
            return model(torch.from_numpy(images).permute(0, 3, 1, 2)).numpy()
    from training.tensorflow import keras_models

    model = keras_models.build_model("tiny", 32, 4)
    with np.load(weights_dir / "rank-0.npz") as npz:
        model.set_weights([npz[k] for k in sorted(npz.files)])
    return model(images, training=False).numpy()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_label_smoothing_changes_the_loss_as_the_formula_says(results, framework):
    run, weights_dir = results[framework]["smoothed"]
    # Both workers' batches of the synthetic global batch (training.data.synthetic); lr 0, so the
    # dumped weights are the ones the logged loss was computed with.
    images, labels = synthetic.samples(0, 16, 32, 4, seed=0)
    logits = _tiny_logits(framework, weights_dir, images).astype(np.float64)
    log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    cross_entropy = -log_p[np.arange(16), labels].mean()
    uniform = -log_p.mean()
    expected = (1 - EPS) * cross_entropy + EPS * uniform
    # Printed to 4 decimals (the TF loop: 4 digits): 6e-4 tells the two apart.
    assert abs(expected - cross_entropy) > 2e-3
    assert run.losses() == pytest.approx([expected], abs=6e-4), run.output
