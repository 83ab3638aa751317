"""Helpers and fixtures for the optimizers/ tests: the project's default pairing (the
article's CNN on scikit-learn's digits), small enough to train in seconds on a CPU, and a
user-style model (depthwise conv, squeeze-excitation, SiLU). Test modules import the fixtures
by name, so they stay out of the shared conftest."""

from __future__ import annotations

import gzip
import io

import pytest
import torch
from torch import nn

from optimizers.base import Context, TrainData
from optimizers.training import evaluate, fit

BATCH = 32
FINETUNE_SAMPLES = 256


def seed_cnn(num_classes: int = 10, in_channels: int = 1, size: int = 8, width: int = 64):
    """The article's CNN: two valid 3x3 convs, ReLU, a Linear classifier."""
    return nn.Sequential(nn.Conv2d(in_channels, width, 3), nn.ReLU(),
                         nn.Conv2d(width, 2 * width, 3), nn.ReLU(), nn.Flatten(),
                         nn.Linear(2 * width * (size - 4) ** 2, num_classes))


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.reduce = nn.Conv2d(channels, channels // 4, 1)
        self.expand = nn.Conv2d(channels // 4, channels, 1)

    def forward(self, x):
        squeezed = nn.functional.silu(self.reduce(x.mean((2, 3), keepdim=True)))
        return x * torch.sigmoid(self.expand(squeezed))


def se_net(num_classes: int = 10, in_channels: int = 1):
    """A user model: depthwise conv + squeeze-excitation gate + SiLU + BatchNorm."""
    return nn.Sequential(
        nn.Conv2d(in_channels, 16, 3, padding=1), nn.BatchNorm2d(16), nn.SiLU(),
        nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.SiLU(),
        SqueezeExcite(16), nn.Conv2d(16, 32, 1), nn.SiLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, num_classes))


MODELS = {"seed_cnn": seed_cnn, "seed_cnn_small": lambda: seed_cnn(width=16), "se_net": se_net}


def _build(name: str) -> nn.Module:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    return MODELS[name]()


def load_digits_split():
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1) / 16.0
    x = (x - x.mean()) / x.std()
    y = torch.tensor(data.target)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    x, y = x[order], y[order]
    split = int(0.8 * len(y))
    return (x[:split], y[:split]), (x[split:], y[split:])


def make_context(train, epochs: int = 1, **overrides) -> Context:
    x, y = train
    fields = dict(train=TrainData(x, y, BATCH, seed=0), example_input=x[:BATCH].clone(),
                  num_classes=10,
                  in_channels=1, epochs=epochs, seed=0, build_model=_build,
                  default_student="seed_cnn_small")
    fields.update(overrides)
    return Context.of(**fields)


@pytest.fixture(scope="session")
def digits_split():
    return load_digits_split()


@pytest.fixture(scope="session")
def trained_cnn(digits_split):
    torch.manual_seed(0)
    model = seed_cnn()
    fit(model, make_context(digits_split[0]).data.train.epochs(("trained_cnn",)), 1, seed=0)
    return model.eval()


@pytest.fixture()
def ctx(digits_split, trained_cnn):
    # Fine-tuning budgets in tests only need to run, not converge: a small slice keeps them fast.
    x, y = digits_split[0]
    return make_context((x[:FINETUNE_SAMPLES], y[:FINETUNE_SAMPLES]), teacher=trained_cnn)


def snapshot(model: nn.Module) -> tuple[dict, list[int], bool]:
    """What must not change: every tensor of the state dict, parameter identities, mode."""
    return ({k: v.detach().clone() for k, v in model.state_dict().items()},
            [id(p) for p in model.parameters()], model.training)


def assert_untouched(model: nn.Module, snap) -> None:
    state, ids, training = snap
    now = model.state_dict()
    assert now.keys() == state.keys()
    for k, v in state.items():
        assert now[k].dtype == v.dtype and torch.equal(now[k], v), k
    assert [id(p) for p in model.parameters()] == ids
    assert model.training == training


def _saved(model: nn.Module) -> bytes:
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getvalue()


def saved_size(model: nn.Module) -> int:
    return len(_saved(model))


def gzip_size(model: nn.Module) -> int:
    return len(gzip.compress(_saved(model)))


def accuracy(model, test, autocast_dtype=None) -> float:
    x, y = test
    return evaluate(model, [(x[i:i + 64], y[i:i + 64]) for i in range(0, len(y), 64)],
                    "cpu", autocast_dtype)


def small(split, n: int = FINETUNE_SAMPLES):
    x, y = split[0]
    return x[:n], y[:n]
