"""The PyTorch models `--model` names: ResNet50 v1.5, and a tiny CNN for tests.

`tiny` has no normalisation layer, so each image's output depends on that image alone: 2 workers
× batch b then compute exactly what 1 worker × batch 2b does (BatchNorm would normalise over
each worker's own batch). The averaging test relies on that. It is the same network as the
TensorFlow flavours' `tiny` (training/tensorflow/keras_models.py): unpadded convolutions,
Glorot-uniform weights and zero biases (Keras' defaults), so the convergence test trains one
network in all three flavours.
"""

from torch import nn

from training.torch.torch_resnet import resnet50


def tiny(num_classes: int) -> nn.Module:
    """Two strided 3×3 convolutions, global average pooling and a linear classifier."""
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2),
        nn.ReLU(inplace=True),
        nn.Conv2d(16, 32, 3, stride=2),
        nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, num_classes),
    )
    for module in model:
        if isinstance(module, nn.Conv2d | nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            nn.init.zeros_(module.bias)
    return model


BUILDERS = {"resnet50": resnet50, "tiny": tiny}


def build_model(name: str, num_classes: int) -> nn.Module:
    if name not in BUILDERS:
        raise ValueError(f"unknown model {name!r}; allowed: {', '.join(sorted(BUILDERS))}")
    return BUILDERS[name](num_classes)
