"""The parts of the ImageNet recipe every flavour applies the same way: which tensors get weight
decay, and the label-smoothed loss. The card with every hyperparameter and its source is
docs/recipe.md.

Weight decay goes on convolution and fully-connected kernels only, never on batch-norm scale and
shift or on biases (NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets
image_classification/optimizers.py: `bn_weight_decay` off by default; Goyal et al. 2017). It is
decided by what a tensor *is* — the layer type and which of its weights — never by its name: this
torch model's stem and shortcut batch norms are called `stem.1` and `downsample.1`, which a
`"bn" in name` filter (NVIDIA's) misses.

Every flavour applies it as coupled L2 decay: `wd · w` is added to the kernel's gradient before
momentum. PyTorch's SGD `weight_decay` does exactly that; the TensorFlow flavours add
`wd/2 · Σw²` to the loss, whose gradient is the same `wd · w` (NVIDIA's TensorFlow ResNet adds
`wd · tf.nn.l2_loss(w)`, TensorFlow/Classification/ConvNets/model/resnet.py; Horovod's
examples/keras/keras_imagenet_resnet50.py, `keras.regularizers.l2(5e-5)` = 1e-4 in this
convention). Keras' own `SGD(weight_decay=…)` is decoupled (applied outside momentum) and would
decay about ten times less at momentum 0.9, so it is not used.

Label smoothing (Szegedy et al. 2016; NVIDIA's smoothing.py): the target is `1 - ε` on the true
class plus `ε / K` on every class, so the loss is `(1 - ε) · (-log p_y) + ε · mean_k(-log p_k)`,
which is also what `torch.nn.functional.cross_entropy(label_smoothing=ε)` computes.

Each framework's side is in torch_recipe.py and tf_recipe.py, so that neither flavour (nor its
image) needs the other's framework; this module holds what they share.
"""

import math

WEIGHT_DECAY = 1e-4  # NVIDIA ResNet50 v1.5 (PyTorch and TensorFlow), Goyal et al.
LABEL_SMOOTHING = 0.1  # NVIDIA ResNet50 v1.5 (`--label-smoothing 0.1` in its launch scripts)


def summary_line(args, tensors: list[tuple[tuple[int, ...], bool]], peak: float, batch: int) -> str:
    """The line rank 0 prints before training: the model's trainable parameters, which of them
    decay, the loss and the rates. `tensors`: (shape, decays) per trainable tensor; `batch`: the
    global batch of one optimizer step."""
    total = sum(math.prod(shape) for shape, _ in tensors)
    decayed = [shape for shape, decays in tensors if decays]
    start = min(args.base_lr, peak) if args.warmup_epochs else peak
    return (
        f"Recipe: {args.model}, {total:,} trainable parameters in {len(tensors)} tensors; "
        f"weight decay {args.weight_decay:g} on {len(decayed)} kernels "
        f"({sum(math.prod(s) for s in decayed):,} parameters), none on the other "
        f"{len(tensors) - len(decayed)} tensors; label smoothing {args.label_smoothing:g}; "
        f"global batch {batch}, peak rate {peak:.6g} (--base-lr {args.base_lr:g} per "
        f"{args.base_batch}), first step {start:.6g}, warm-up {args.warmup_epochs:g} epochs"
    )
