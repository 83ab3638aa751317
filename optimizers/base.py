"""What every technique receives and returns.

A technique is one call, as easy from a notebook as from the engine::

    outcome = pruning.apply(model, PruneSettings(0.5, "channel"), context)
    outcome.model        # a new model; the one passed in is never touched
    outcome.config       # what was applied, with which settings (recorded in the results)

``Context`` carries what a technique may need beyond the model: data to fine-tune or
calibrate on, the device, an example input, the teacher. Nothing here knows about the
benchmark engine, so the optimizers stay usable on their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import torch
from torch import nn

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass
class Context:
    # Yields (inputs, labels) batches of the training split, freshly shuffled per call.
    train_batches: Callable[[], Iterable[Batch]]
    example_input: torch.Tensor  # one batch of the measured shape, on the CPU
    num_classes: int
    in_channels: int
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    epochs: int = 8           # the sweep's training budget, for students
    lr: float = 1e-3
    seed: int = 0
    teacher: nn.Module | None = None
    # Builds a registry model by name (for students): (name) -> nn.Module.
    build_model: Callable[[str], nn.Module] | None = None
    # The registry's default student for the teacher's family, or None.
    default_student: str | None = None
    # Looks up or trains a model: cached(key_parts, build, train) -> nn.Module. The key parts
    # name everything that changes the weights; build() makes the untrained structure, train(m)
    # trains it in place. Without a cache, train simply runs.
    cached: Callable | None = None
    # Progress: (phase, fraction 0..1) -> None.
    on_progress: Callable[[str, float], None] | None = None
    # Labels for cache keys: the identity of the base model being transformed.
    base_key: tuple = ()

    def progress(self, phase: str, fraction: float) -> None:
        if self.on_progress is not None:
            self.on_progress(phase, fraction)

    def train_cached(self, key_parts: tuple, build: Callable[[], nn.Module],
                     train: Callable[[nn.Module], None]) -> nn.Module:
        if self.cached is not None:
            return self.cached(tuple(self.base_key) + tuple(key_parts), build, train)
        model = build()
        train(model)
        return model


@dataclass
class Outcome:
    model: nn.Module
    config: dict = field(default_factory=dict)
    # Where the model must run: INT8 kernels of PyTorch's x86 backend are CPU-only, so a GPU
    # sweep runs those variants on the CPU and says so.
    device: torch.device | None = None
    # Autocast dtype to apply at run time (AMP), or None.
    autocast_dtype: torch.dtype | None = None
    # FLOPs per sample of the float graph, for models whose ops the counter cannot see (INT8).
    flops_hint: int | None = None
    # Per-layer sparsity for pruned variants: {layer name: fraction of zero weights}.
    layer_sparsity: dict[str, float] | None = None

    def autocast(self, device_type: str) -> AbstractContextManager:
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(device_type=device_type, dtype=self.autocast_dtype)


def iterate(batches: Iterable[Batch], device: torch.device) -> Iterator[Batch]:
    for x, y in batches:
        yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)
