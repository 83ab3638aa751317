"""An example of a user's own model: depthwise convolutions, a squeeze-excitation gate and SiLU.

The dashboard offers the files of this folder (the operator's models folder, set with
COMPRESSION_BENCH_MODELS_DIR); the CLI takes any file: --model models/se_net.py:build
"""

import torch
from torch import nn


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, reduction: int = 4):
        super().__init__()
        self.reduce = nn.Conv2d(channels, channels // reduction, 1)
        self.expand = nn.Conv2d(channels // reduction, channels, 1)

    def forward(self, x):
        gate = nn.functional.silu(self.reduce(x.mean((2, 3), keepdim=True)))
        return x * torch.sigmoid(self.expand(gate))


def block(cin: int, cout: int) -> nn.Sequential:
    """Depthwise-separable: a per-channel 3x3, the SE gate, then a 1x1 that mixes channels."""
    return nn.Sequential(
        nn.Conv2d(cin, cin, 3, padding=1, groups=cin, bias=False), nn.BatchNorm2d(cin),
        nn.SiLU(), SqueezeExcite(cin),
        nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.SiLU())


def build(num_classes: int, in_channels: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(in_channels, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.SiLU(),
        block(32, 64), block(64, 64),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes))
