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

Frameworks are imported inside the functions: the option parser imports this module's defaults.
"""

WEIGHT_DECAY = 1e-4  # NVIDIA ResNet50 v1.5 (PyTorch and TensorFlow), Goyal et al.
LABEL_SMOOTHING = 0.1  # NVIDIA ResNet50 v1.5 (`--label-smoothing 0.1` in its launch scripts)


# --- PyTorch -------------------------------------------------------------------------------


def torch_param_groups(model, weight_decay: float) -> list[dict]:
    """SGD parameter groups: the `weight` of every convolution and linear layer decays, every
    other parameter (batch-norm weight and bias, all biases) does not."""
    from torch import nn

    kernel_types = (nn.modules.conv._ConvNd, nn.Linear)
    decay, no_decay = [], []
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            is_kernel = name == "weight" and isinstance(module, kernel_types)
            (decay if is_kernel else no_decay).append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def torch_loss(logits, labels, label_smoothing: float):
    """Mean label-smoothed cross-entropy, in float32 whatever the autocast dtype."""
    import torch.nn.functional as F

    return F.cross_entropy(logits.float(), labels, label_smoothing=label_smoothing)


# --- TensorFlow / Keras --------------------------------------------------------------------


def keras_decayed_kernels(model) -> list:
    """The `kernel` of every convolution and dense layer of `model` (nested layers included);
    batch norm's gamma/beta and every bias are left out."""
    import tensorflow as tf

    kernel_layers = (tf.keras.layers.Conv1D, tf.keras.layers.Conv2D, tf.keras.layers.Conv3D)
    kernel_layers += (tf.keras.layers.Dense,)
    layers = [model, *model.submodules]
    return [layer.kernel for layer in layers if isinstance(layer, kernel_layers)]


def add_keras_weight_decay(model, weight_decay: float) -> list:
    """Adds `weight_decay / 2 · Σ w²` over the decayed kernels to `model.losses` (its gradient is
    `weight_decay · w`, PyTorch's coupled decay); returns those kernels."""
    import tensorflow as tf

    kernels = keras_decayed_kernels(model)
    if weight_decay > 0 and kernels:

        def penalty():
            squares = [tf.reduce_sum(tf.square(tf.cast(k, tf.float32))) for k in kernels]
            return 0.5 * weight_decay * tf.add_n(squares)

        model.add_loss(penalty)
    return kernels


def keras_loss(label_smoothing: float):
    """Per-example label-smoothed cross-entropy of integer labels and float logits: a loss
    function for Keras' `compile` (Keras 2's SparseCategoricalCrossentropy has no smoothing).
    Computed on fp32 logits: under mixed precision an fp16 loss times the loss scale (2^15 at
    first) overflows as soon as the loss exceeds 2 (https://www.tensorflow.org/guide/mixed_precision)."""
    import tensorflow as tf

    def smoothed_cross_entropy(labels, logits):
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        labels = tf.cast(tf.reshape(labels, [-1]), tf.int32)
        nll = -tf.gather(log_probs, labels, axis=-1, batch_dims=1)
        if not label_smoothing:
            return nll
        uniform = -tf.reduce_mean(log_probs, axis=-1)
        return (1.0 - label_smoothing) * nll + label_smoothing * uniform

    return smoothed_cross_entropy


def summary_line(args, tensors: list[tuple[tuple[int, ...], bool]], peak: float, batch: int) -> str:
    """The line rank 0 prints before training: the model's trainable parameters, which of them
    decay, the loss and the rates. `tensors`: (shape, decays) per trainable tensor; `batch`: the
    global batch of one optimizer step."""
    import math

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
