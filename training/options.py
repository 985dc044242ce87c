"""The command-line options every training script shares (`--help` on any of them lists them).

Defaults are ImageNet's ResNet50 recipe (224 px, 1000 classes, 90 epochs); `--recipe` picks
the optimisation hyperparameters (Goyal et al.'s by default, or NVIDIA's; training.recipe.RECIPES
and docs/recipe.md give their sources), and each of their options given on its own still wins.
`azdl train` passes small settings for the local demo.
"""

import argparse

from training import checkpoints, recipe
from training.data.imagenet import IMAGENET_TRAIN_IMAGES
from training.epoch_log import STRAGGLER_FACTOR
from training.flavours import FRAMEWORKS, entry_module, runs_under
from training.schedule import DECAYS

MODELS = ("resnet50", "tiny")
PRECISIONS = ("fp32", "fp16", "bf16")


def _steps_or_auto(text: str) -> int | str:
    if text == checkpoints.AUTO:
        return text
    try:
        return _at_least(1)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a number of steps or auto, got {text!r}"
        ) from None


def _at_least(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _fraction_below_one(text: str) -> float:
    value = _non_negative_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {value}")
    return value


def _above_one(text: str) -> float:
    value = _non_negative_float(text)
    if value <= 1:
        raise argparse.ArgumentTypeError(f"must be above 1, got {value}")
    return value


class _CheckedParser(argparse.ArgumentParser):
    """Also checks combinations of options (`check_combinations`), for every caller: the
    training scripts, training.torch.train_elastic and `azdl submit`'s check before submitting
    (which adds --checkpoint-dir itself, so that one is checked when a script starts)."""

    def __init__(self, framework: str, **kwargs):
        super().__init__(**kwargs)
        self.framework = framework

    def parse_known_args(self, args=None, namespace=None):
        parsed, extra = super().parse_known_args(args, namespace)
        recipe.apply(parsed)
        if problem := check_combinations(self.framework, parsed, complete=False):
            self.error(problem)
        return parsed, extra


def build_parser(framework: str) -> argparse.ArgumentParser:
    if framework not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}; allowed: {', '.join(FRAMEWORKS)}")
    torchrun = runs_under(framework, "torchrun")
    starters = "horovodrun, mpirun or torchrun" if torchrun else "horovodrun or mpirun"
    p = _CheckedParser(
        framework,
        prog=f"python -m {entry_module(framework)}",
        description=f"Data-parallel training ({framework}); run one process per worker "
        f"({starters}). Rank 0 prints the throughput lines at the end.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    data = p.add_argument_group("data")
    data.add_argument(
        "--data-dir",
        help="directory with TFRecord shards (train-00000-of-01024, validation-…); "
        "synthetic data when not given",
    )
    data.add_argument(
        "--synthetic-length",
        type=_at_least(1),
        default=IMAGENET_TRAIN_IMAGES,
        help="images per epoch of the synthetic source",
    )
    data.add_argument("--image-size", type=_at_least(32), default=224, help="pixels per side")
    data.add_argument("--num-classes", type=_at_least(2), default=1000)
    data.add_argument(
        "--label-offset",
        type=_at_least(0),
        default=0,
        help="subtracted from every TFRecord label: 1 for TF-slim's 1-based ImageNet shards "
        "(labels 1..1000, 0 = background) with --num-classes 1000",
    )
    data.add_argument("--shuffle-buffer", type=_at_least(1), default=10_000)
    data.add_argument(
        "--val-steps",
        type=_at_least(0),
        help="validation batches per worker per epoch (default: the whole validation split "
        "with --data-dir, none with synthetic data)",
    )

    train = p.add_argument_group("training")
    train.add_argument("--model", choices=MODELS, default="resnet50")
    train.add_argument("--batch-size", type=_at_least(1), default=32, help="images per worker")
    if framework in ("keras", "torch"):
        train.add_argument(
            "--grad-accum",
            type=_at_least(1),
            default=1,
            help="micro-batches of --batch-size per optimizer step (Horovod's "
            "backward_passes_per_step); the TF loop has a larger --batch-size instead",
        )
    else:
        p.set_defaults(grad_accum=1)  # what the data, schedule and throughput code read
    train.add_argument("--epochs", type=_at_least(1), default=90)
    train.add_argument(
        "--steps-per-epoch",
        type=_at_least(1),
        help="optimizer steps per epoch; default: one pass over the data (synthetic: "
        "--synthetic-length images)",
    )
    train.add_argument("--seed", type=int, default=0)
    train.add_argument(
        "--recipe",
        choices=tuple(recipe.RECIPES),
        default=recipe.DEFAULT_RECIPE,
        help="the defaults of --base-lr, --momentum, --weight-decay, --label-smoothing, "
        f"--warmup-epochs and --lr-decay: {recipe.describe()}",
    )
    train.add_argument(
        "--weight-decay",
        type=_non_negative_float,
        default=recipe.FROM_RECIPE,
        help="L2 weight decay on convolution and fully-connected kernels only (never batch-norm "
        "scale/shift or biases)",
    )
    train.add_argument(
        "--label-smoothing",
        type=_fraction_below_one,
        default=recipe.FROM_RECIPE,
        help="share of the target spread evenly over all classes",
    )

    lr = p.add_argument_group("learning rate")
    lr.add_argument(
        "--base-lr",
        type=_non_negative_float,
        default=recipe.FROM_RECIPE,
        help="learning rate per --base-batch images",
    )
    lr.add_argument(
        "--base-batch",
        type=_at_least(1),
        default=256,
        help="global batch --base-lr is meant for; the rate scales linearly from there",
    )
    lr.add_argument(
        "--momentum", type=_non_negative_float, default=recipe.FROM_RECIPE, help="SGD momentum"
    )
    lr.add_argument(
        "--warmup-epochs",
        type=_non_negative_float,
        default=recipe.FROM_RECIPE,
        help="linear warm-up from --base-lr to the scaled peak (Goyal et al.); fractions allowed",
    )
    lr.add_argument(
        "--lr-decay", choices=DECAYS, default=recipe.FROM_RECIPE, help="schedule after warm-up"
    )
    lr.add_argument("--decay-epochs", type=_at_least(1), nargs="*", default=[30, 60, 80])
    lr.add_argument("--decay-factor", type=_non_negative_float, default=0.1)

    perf = p.add_argument_group("performance")
    perf.add_argument("--precision", choices=PRECISIONS, default="fp32")
    perf.add_argument("--fp16-allreduce", action="store_true", help="fp16 gradient compression")
    perf.add_argument(
        "--horovod-timeline",
        metavar="FILE",
        help="write a Horovod timeline (chrome://tracing) from rank 0",
    )
    perf.add_argument(
        "--threads",
        type=_at_least(0),
        default=0,
        help="CPU threads per worker for the framework's ops (0: the framework's default)",
    )
    perf.add_argument(
        "--timing-warmup-steps",
        type=_at_least(0),
        default=10,
        help="first steps left out of the throughput figures",
    )
    if framework in ("keras", "tf"):
        perf.add_argument("--xla", action="store_true", help="compile the model step with XLA")
    if framework == "torch":
        perf.add_argument(
            "--channels-last",
            action="store_true",
            help="NHWC memory layout for the images and activations (faster convolutions on "
            "tensor cores); the weights stay NCHW, as Horovod 0.28.1 needs",
        )
        perf.add_argument(
            "--straggler-factor",
            type=_above_one,
            default=STRAGGLER_FACTOR,
            help="name a rank a straggler when its own forward + backward per step takes this "
            f"many times the median rank's (default {STRAGGLER_FACTOR}; docs/jobs.md, Stragglers)",
        )
        perf.add_argument(
            "--compile",
            action="store_true",
            help="compile the model with torch.compile (the first step compiles; see "
            "docs/gpu.md before relying on it)",
        )
        data.add_argument(
            "--decode",
            choices=("auto", "cpu", "gpu"),
            default="auto",
            help="where TFRecord JPEGs are decoded and augmented: gpu (nvJPEG; torchvision), "
            "cpu (worker processes); auto: gpu on a GPU",
        )
        data.add_argument(
            "--data-workers",
            type=_at_least(0),
            help="processes that read and decode TFRecords (0: in the training process; "
            "default: this worker's share of the cores, as --threads)",
        )

    out = p.add_argument_group("outputs")
    out.add_argument("--checkpoint-dir", help="rank 0 checkpoints here every epoch; resumes")
    out.add_argument(
        "--checkpoint-every-steps",
        type=_steps_or_auto,
        metavar="N|auto",
        help="also checkpoint every N optimizer steps inside an epoch (preemptible nodes: a "
        "relaunch resumes at that step); auto: Young's interval from the measured checkpoint "
        "time and the nodes' mean time between failures (docs/jobs.md); needs --checkpoint-dir",
    )
    out.add_argument("--keep-checkpoints", type=_at_least(1), default=2)
    out.add_argument("--log-dir", help="TensorBoard logs (rank 0)")
    out.add_argument(
        "--dump-weights",
        metavar="DIR",
        help="every rank writes its final weights to DIR/rank-<r>.npz (to compare ranks)",
    )
    if framework in ("keras", "tf"):
        elastic = p.add_argument_group("elastic training (Horovod elastic, see docs/resilience.md)")
        elastic.add_argument(
            "--elastic",
            action="store_true",
            help="keep training when workers leave or join (launch with horovodrun --min-np "
            "--max-np --host-discovery-script)",
        )
        elastic.add_argument(
            "--commit-every",
            type=_at_least(1),
            default=5,
            help="steps between elastic state commits: a lost worker costs at most this many",
        )
    return p


def check_combinations(framework: str, args: argparse.Namespace, complete=True) -> str | None:
    """What is wrong with a combination of options that each parse on their own, or None.
    `complete`: these are all the options the script will get (not `azdl submit`'s part)."""
    if complete and args.checkpoint_every_steps and not args.checkpoint_dir:
        return "--checkpoint-every-steps needs --checkpoint-dir (where the checkpoints go)"
    if framework == "keras" and args.grad_accum > 1 and getattr(args, "elastic", False):
        return (
            "--elastic with --grad-accum > 1 is not supported by the Keras flavour (Horovod's "
            "accumulation buffers are not part of the elastic state); use --grad-accum 1"
        )
    return None


def parse_args(framework: str, argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser(framework)
    args = parser.parse_args(argv)
    if problem := check_combinations(framework, args):
        parser.error(problem)
    return args
