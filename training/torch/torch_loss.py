"""The recipe's PyTorch side: which parameters decay and the label-smoothed loss. Why these
choices, and their sources: docs/architecture.md ("Recipe") and docs/recipe.md."""

import torch.nn.functional as F
from torch import nn


def param_groups(model, weight_decay: float) -> list[dict]:
    """SGD parameter groups: the `weight` of every convolution and linear layer decays, every
    other parameter (batch-norm weight and bias, all biases) does not."""
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


def loss(logits, labels, label_smoothing: float):
    """Mean label-smoothed cross-entropy, in float32 whatever the autocast dtype."""
    return F.cross_entropy(logits.float(), labels, label_smoothing=label_smoothing)
