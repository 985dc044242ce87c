"""The recipe's pieces in one process (no Horovod): the Keras ResNet50 v1.5 against the torch one,
weight-decay selection by tensor role, the label-smoothed loss against PyTorch's and Keras' own,
and the random-resized-crop.

Truths written by others: torchvision's ResNet50 has 25,557,032 parameters (its model card,
https://pytorch.org/vision/stable/models/generated/torchvision.models.resnet50.html);
`torch.nn.functional.cross_entropy(label_smoothing=…)` and Keras' `CategoricalCrossentropy(
label_smoothing=…)` implement label smoothing; torchvision's `RandomResizedCrop.get_params`
(torchvision/transforms/transforms.py) defines the crop.
"""

import math

import numpy as np
import pytest
import tensorflow as tf  # the training environment has both: a broken install must fail, not skip
import torch  # the training environment has both: a broken install must fail, not skip

from training.tensorflow import keras_loss, keras_models, pipeline
from training.torch import torch_loss
from training.torch.torch_resnet import resnet50

TORCHVISION_RESNET50_PARAMS = 25_557_032


@pytest.fixture(scope="module")
def models():
    tf.keras.utils.set_random_seed(0)
    torch.manual_seed(0)
    return keras_models.build_model("resnet50", 64, 1000), resnet50(1000)


def _keras_name(torch_name: str) -> str:
    """torch `stages.3.downsample.0.weight` → Keras `stages_3_downsample_0/kernel`."""
    module, kind = torch_name.rsplit(".", 1)
    layer = module.replace(".", "_")
    return layer, kind


def _keras_weights_by_torch_name(keras_model, torch_model):
    """Every torch parameter and buffer with its Keras counterpart (layouts converted)."""
    by_name = {w.name.removesuffix(":0"): w for w in keras_model.weights}
    pairs = {}
    for name, tensor in torch_model.state_dict().items():
        if name.endswith("num_batches_tracked"):
            continue
        layer, kind = _keras_name(name)
        if tensor.ndim == 1:
            keras_kind = {
                "weight": "gamma",
                "bias": "beta" if f"{layer}/beta" in by_name else "bias",
                "running_mean": "moving_mean",
                "running_var": "moving_variance",
            }[kind]
        else:
            keras_kind = "kernel"
        pairs[name] = by_name.pop(f"{layer}/{keras_kind}")
    assert not by_name, f"Keras weights without a torch counterpart: {sorted(by_name)}"
    return pairs


def _to_keras_layout(array: np.ndarray) -> np.ndarray:
    if array.ndim == 4:  # torch (out, in, kh, kw) → Keras (kh, kw, in, out)
        return array.transpose(2, 3, 1, 0)
    if array.ndim == 2:  # (out, in) → (in, out)
        return array.T
    return array


def test_keras_and_torch_resnet50_have_torchvisions_parameter_count_and_the_same_tensors(models):
    keras_model, torch_model = models
    keras_count = sum(math.prod(w.shape) for w in keras_model.trainable_weights)
    assert keras_count == TORCHVISION_RESNET50_PARAMS
    assert sum(p.numel() for p in torch_model.parameters()) == TORCHVISION_RESNET50_PARAMS
    assert len(keras_model.trainable_weights) == len(list(torch_model.parameters())) == 161
    for name, weight in _keras_weights_by_torch_name(keras_model, torch_model).items():
        torch_shape = tuple(torch_model.state_dict()[name].shape)
        assert tuple(weight.shape) == _to_keras_layout(np.empty(torch_shape)).shape, name


def test_keras_resnet50_is_v1_5_with_the_training_settings(models):
    keras_model, _ = models
    layers = {layer.name: layer for layer in keras_model.layers}
    convs = [x for x in keras_model.layers if isinstance(x, tf.keras.layers.Conv2D)]
    bns = [x for x in keras_model.layers if isinstance(x, tf.keras.layers.BatchNormalization)]
    assert len(convs) == 53 and len(bns) == 53
    assert not any(c.use_bias for c in convs)
    assert all(b.momentum == 0.9 and b.epsilon == 1e-5 for b in bns)
    strided = sorted(c.name for c in convs if c.strides == (2, 2))
    # v1.5: the 3×3 of each stage's first block strides (plus its shortcut and the stem).
    assert strided == sorted(
        ["stem_0"] + [f"stages_{i}_{c}" for i in (3, 7, 13) for c in ("conv2", "downsample_0")]
    )
    last_bns = [b for b in bns if b.name.endswith("_bn3")]
    assert len(last_bns) == 16 and not any(np.any(b.gamma.numpy()) for b in last_bns)
    assert all(np.all(b.gamma.numpy() == 1) for b in bns if b not in last_bns)
    # He initialisation, fan-out mode: std sqrt(2 / (kh · kw · out)), within sampling noise.
    for conv in convs:
        kh, kw, _, out = conv.kernel.shape
        assert np.std(conv.kernel.numpy()) == pytest.approx(math.sqrt(2 / (kh * kw * out)), 0.1)
    bound = 1 / math.sqrt(2048)  # torch nn.Linear's default
    assert np.abs(layers["fc"].kernel.numpy()).max() <= bound
    assert np.abs(layers["fc"].bias.numpy()).max() <= bound


@pytest.mark.parametrize("training", [False, True])
def test_keras_resnet50_computes_the_torch_function(models, training):
    """The torch weights in the Keras model give the same logits: same strides, padding,
    batch-norm epsilon, block wiring (inference and batch statistics alike)."""
    keras_model, torch_model = models
    torch.manual_seed(1)
    with torch.no_grad():  # non-trivial batch-norm state and γ, so every branch counts
        for module in torch_model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 2.0)
    for name, weight in _keras_weights_by_torch_name(keras_model, torch_model).items():
        weight.assign(_to_keras_layout(torch_model.state_dict()[name].numpy()))
    images = np.random.default_rng(0).normal(size=(2, 3, 64, 64)).astype(np.float32)
    torch_model.train(training)
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(images)).numpy()
    got = keras_model(images.transpose(0, 2, 3, 1), training=training).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-3 * np.abs(expected).max())


def test_weight_decay_goes_on_conv_and_fc_kernels_only_by_role(models):
    keras_model, torch_model = models
    decay, no_decay = torch_loss.param_groups(torch_model, 1e-4)
    assert decay["weight_decay"] == 1e-4 and no_decay["weight_decay"] == 0
    names = {id(p): n for n, p in torch_model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    assert len(decayed) == 54 and len(no_decay["params"]) == 107
    # The stem's and the shortcuts' batch norms are `stem.1` and `stages.N.downsample.1`: a
    # name filter for "bn" would decay them.
    assert "stem.0.weight" in decayed and "stem.1.weight" not in decayed
    assert "stages.3.downsample.0.weight" in decayed
    assert "stages.3.downsample.1.weight" not in decayed and "fc.bias" not in decayed
    assert decayed == {n for n, p in torch_model.named_parameters() if p.ndim > 1}

    kernels = keras_loss.decayed_kernels(keras_model)
    pairs = _keras_weights_by_torch_name(keras_model, torch_model)
    assert {id(k) for k in kernels} == {id(pairs[n]) for n in decayed}


def test_keras_penalty_gradient_is_torchs_coupled_decay():
    tf.keras.utils.set_random_seed(0)
    model = keras_models.build_model("tiny", 32, 4)
    kernels = keras_loss.add_weight_decay(model, 0.01)
    assert len(kernels) == 3  # 2 conv + 1 dense; no bias
    with tf.GradientTape() as tape:
        penalty = tf.add_n(model.losses)
    grads = tape.gradient(penalty, model.trainable_weights)
    for weight, grad in zip(model.trainable_weights, grads, strict=True):
        if any(weight is k for k in kernels):
            np.testing.assert_allclose(grad.numpy(), 0.01 * weight.numpy(), rtol=1e-5)
        else:
            assert grad is None or not np.any(grad.numpy()), weight.name


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.4])
def test_label_smoothing_matches_torch_and_keras(smoothing):
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=3, size=(16, 10)).astype(np.float32)
    labels = rng.integers(10, size=16)
    ours_tf = float(tf.reduce_mean(keras_loss.loss(smoothing)(labels, logits)))
    ours_torch = float(
        torch_loss.loss(torch.from_numpy(logits), torch.from_numpy(labels), smoothing)
    )
    keras = tf.keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=smoothing)
    reference = float(keras(tf.one_hot(labels, 10), logits))
    log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    formula = np.mean((1 - smoothing) * -log_p[np.arange(16), labels] + smoothing * -log_p.mean(1))
    assert ours_tf == pytest.approx(reference, rel=1e-5)
    assert ours_torch == pytest.approx(reference, rel=1e-5)
    assert formula == pytest.approx(reference, rel=1e-5)


def _windows(height, width, count, seed=0):
    return np.array(
        [
            pipeline.crop_window(height, width, tf.constant([seed, i], tf.int64)).numpy()
            for i in range(count)
        ]
    )


def test_random_resized_crop_draws_8_to_100_percent_at_aspect_3_4_to_4_3():
    windows = _windows(300, 400, 400)
    top, left, h, w = windows.T
    assert np.all(top >= 0) and np.all(left >= 0)
    assert np.all(top + h <= 300) and np.all(left + w <= 400)
    area = h * w / (300 * 400)
    assert area.min() >= 0.08 - 0.01 and area.max() <= 1.0
    assert area.min() < 0.15 and area.max() > 0.85  # the whole range is used
    aspect = w / h
    assert aspect.min() >= 3 / 4 - 0.02 and aspect.max() <= 4 / 3 + 0.02
    # The mean area of the accepted draws: a uniform 8-100 % draw, cut where it doesn't fit.
    assert 0.4 < area.mean() < 0.6
    assert len({tuple(x) for x in windows}) > 390  # every draw its own


def test_random_resized_crop_falls_back_to_a_center_crop_like_torchvision():
    # A 1000 × 10 strip: no draw of 3/4-4/3 aspect and ≥ 8 % area fits, so torchvision's
    # fallback: the whole width... here the height, clamped to aspect 4/3, centred.
    windows = _windows(10, 1000, 5)
    assert {tuple(x) for x in windows} == {(0, (1000 - 13) // 2, 10, 13)}
    windows = _windows(1000, 10, 5)  # tall strip: full width, height 10 / (3/4) = 13
    assert {tuple(x) for x in windows} == {((1000 - 13) // 2, 0, 13, 10)}


def test_every_rank_has_its_own_augmentation_stream():
    seeds = {pipeline.augmentation_seed(0, rank) for rank in range(64)}
    assert len(seeds) == 64
    assert pipeline.augmentation_seed(0, 1) == pipeline.augmentation_seed(0, 1)
    assert pipeline.augmentation_seed(1, 0) != pipeline.augmentation_seed(0, 0)
