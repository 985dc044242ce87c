"""ResNet50 v1.5 in plain PyTorch (torchvision has no CPU build to install beside the CPU torch).

v1.5 differs from the paper's v1 in one place: a bottleneck that downsamples does so in its 3×3
convolution, not in the first 1×1 (as in NVIDIA's and torchvision's reference models). The last
BatchNorm layer of every block starts at zero, so each block starts as the identity.
"""

import torch
from torch import nn


class Bottleneck(nn.Module):
    """1×1 reduce → 3×3 (carries the stride, v1.5) → 1×1 expand, plus the shortcut."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int):
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + shortcut)


class ResNet(nn.Module):
    def __init__(self, blocks: tuple[int, ...], num_classes: int):
        super().__init__()
        if num_classes < 1:
            raise ValueError(f"num_classes must be at least 1, got {num_classes}")
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages = []
        channels = 64
        for index, count in enumerate(blocks):
            width = 64 * 2**index
            for block in range(count):
                stride = 2 if index > 0 and block == 0 else 1
                stages.append(Bottleneck(channels, width, stride))
                channels = width * Bottleneck.expansion
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes)

        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        for module in self.modules():
            if isinstance(module, Bottleneck):
                nn.init.zeros_(module.bn3.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def resnet50(num_classes: int = 1000) -> ResNet:
    """ResNet50 v1.5: bottleneck blocks 3-4-6-3, about 25.6 M parameters at 1,000 classes."""
    return ResNet((3, 4, 6, 3), num_classes)
