"""What every technique receives and returns.

A technique is one call, as easy from a notebook as from the engine::

    outcome = pruning.apply(model, PruneSettings(0.5, "channel"), context)
    outcome.model        # a new model; the one passed in is never touched
    outcome.config       # what was applied, with which settings (recorded in the results)

``Context`` carries what a technique may need beyond the model: data to fine-tune or
calibrate on, the device, an example input, the teacher. Nothing here knows about the
benchmark engine, so the optimizers stay usable on their own.

Reproducible by construction: every training step draws its data order from its own key
(``TrainData.epochs(key)``), never from a counter shared with other steps, so a model's
weights do not depend on what was trained before it or on which steps were cache hits.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import torch
from torch import nn

# (inputs, labels) or (inputs, labels, sample indices): fit passes every part to the loss.
Batch = tuple[torch.Tensor, ...]


def key_seed(*parts) -> int:
    """A 63-bit seed from any JSON-able parts: the same parts, the same seed, every process."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1


@dataclass
class TrainData:
    """The training split in memory, handed out in shuffled batches with their indices."""

    x: torch.Tensor
    y: torch.Tensor
    batch_size: int = 32
    seed: int = 0

    def __len__(self) -> int:
        return len(self.y)

    def epochs(self, key: tuple = ()) -> Callable[[], Iterator[Batch]]:
        """A factory of epochs for one training step: each call yields the next epoch's
        (x, y, index) batches, in an order that depends only on ``seed``, ``key`` and how
        many epochs this factory has made."""
        base = key_seed(self.seed, *key)
        counter = itertools.count()

        def epoch() -> Epoch:
            g = torch.Generator().manual_seed((base + next(counter)) % 2**63)
            return Epoch(self, torch.randperm(len(self), generator=g))
        return epoch

    def ordered(self, batch_size: int = 256) -> Iterator[Batch]:
        for i in range(0, len(self), batch_size):
            idx = torch.arange(i, min(i + batch_size, len(self)))
            yield self.x[idx], self.y[idx], idx


class Epoch:
    """One epoch's batches in a drawn order, made as they are iterated: the training split
    (kept as stored, uint8 pixels for images) is never copied whole. Sized, so a training
    loop knows its steps without listing them."""

    def __init__(self, data: TrainData, order: torch.Tensor):
        self.data, self.order = data, order

    def __len__(self) -> int:
        return -(-len(self.order) // self.data.batch_size)

    def __iter__(self) -> Iterator[Batch]:
        step = self.data.batch_size
        for i in range(0, len(self.order), step):
            idx = self.order[i:i + step]
            yield self.data.x[idx], self.data.y[idx], idx


@dataclass(frozen=True)
class Step:
    """A step already applied in a chain: what later steps may look at."""
    technique: str
    settings: object
    config: dict


@dataclass
class Data:
    """What a technique learns from and measures with."""
    train: TrainData             # the training split: fine-tuning, students, calibration
    example_input: torch.Tensor  # one batch of the measured shape, on the CPU
    num_classes: int
    in_channels: int


@dataclass
class Budget:
    """How the fine-tunes and students of a sweep train."""
    epochs: int = 8           # the sweep's training budget, for students
    lr: float = 1e-3
    seed: int = 0
    # Mixed precision for the fine-tunes of a chain that ends in AMP: "fp16" on CUDA trains
    # under autocast with a GradScaler, so the weights are tuned for the precision they run in.
    amp: str | None = None


@dataclass
class Teaching:
    """Who teaches, and which student a distillation builds."""
    teacher: nn.Module | None = None
    # Builds a registry model by name (for students): (name) -> nn.Module.
    build_model: Callable[[str], nn.Module] | None = None
    # The registry's default student for the teacher's family, or None.
    default_student: str | None = None


@dataclass
class Lineage:
    """Where in a chain the model being transformed stands."""
    # Labels for cache keys: the identity of the base model being transformed.
    base_key: tuple = ()
    # In a chain: the steps applied before this one, and where their outcome runs (None:
    # the context's device). A technique reads them to adapt (distillation after pruning
    # recovers).
    prior: tuple[Step, ...] = ()
    model_device: torch.device | None = None


@dataclass
class Hooks:
    """What the caller lends: a cache, a progress callback, a dict shared by a sweep."""
    # Looks up or trains a model: cached(key_parts, build, train) -> nn.Module. The key parts
    # name everything that changes the weights; build() makes the untrained structure, train(m)
    # trains it in place. Without a cache, train simply runs.
    cached: Callable | None = None
    # Progress: (phase, fraction 0..1) -> None.
    on_progress: Callable[[str, float], None] | None = None
    # Work shared by every variant of a sweep (the teacher's logits, calibration batches):
    # computed once, here, when the caller passes a dict.
    shared: dict | None = None


_PARTS = {"data": Data, "budget": Budget, "teaching": Teaching, "lineage": Lineage,
          "hooks": Hooks}
# Flat names that differ from their field's name in the part (``Context.of``).
_RENAMED = {"train_amp": ("budget", "amp")}


@dataclass
class Context:
    """Everything a technique receives beside the model and its settings, in the parts it
    is made of."""
    data: Data
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    budget: Budget = field(default_factory=Budget)
    teaching: Teaching = field(default_factory=Teaching)
    lineage: Lineage = field(default_factory=Lineage)
    hooks: Hooks = field(default_factory=Hooks)

    @classmethod
    def of(cls, *, device: torch.device | None = None, **flat) -> Context:
        """A context from flat field names (``train=``, ``example_input=``, ``epochs=``,
        ``teacher=``, ...), as a notebook or a test writes it."""
        where = {name: (part, name) for part, kind in _PARTS.items()
                 for name in kind.__dataclass_fields__}
        where.update(_RENAMED)
        parts: dict[str, dict] = {part: {} for part in _PARTS}
        for name, value in flat.items():
            if name not in where:
                raise TypeError(f"Context has no field {name!r}; accepted: "
                                f"{', '.join(sorted(where))}, device")
            part, field_name = where[name]
            parts[part][field_name] = value
        made = {part: _PARTS[part](**values) for part, values in parts.items()}
        return cls(**made, **({} if device is None else {"device": device}))

    def taught_by(self, teacher: nn.Module) -> Context:
        """This context with ``teacher`` as the teacher."""
        return dataclasses.replace(
            self, teaching=dataclasses.replace(self.teaching, teacher=teacher))

    def then(self, step: Step, model_device: torch.device | None,
             key: tuple) -> Context:
        """The context of the next step in a chain, after ``step`` (its outcome running on
        ``model_device``); ``key`` joins the cache key of every later step's weights."""
        lineage = Lineage(base_key=tuple(self.lineage.base_key) + tuple(key),
                          prior=self.lineage.prior + (step,), model_device=model_device)
        return dataclasses.replace(self, lineage=lineage)

    def after(self, technique: str) -> Step | None:
        """The prior step of ``technique`` in this chain, if there was one."""
        return next((s for s in self.lineage.prior if s.technique == technique), None)

    def progress(self, phase: str, fraction: float) -> None:
        if self.hooks.on_progress is not None:
            self.hooks.on_progress(phase, fraction)

    def train_cached(self, key_parts: tuple, build: Callable[[], nn.Module],
                     train: Callable[[nn.Module, Callable[[], Iterable[Batch]]], None]
                     ) -> nn.Module:
        """The model ``build()`` makes, trained by ``train(model, epochs)`` or loaded from the
        cache. ``epochs`` is the step's own data (``TrainData.epochs(key)``): the weights
        depend on the key alone."""
        if self.budget.amp is not None:  # trained in another precision: other weights
            key_parts = tuple(key_parts) + ("train_amp", self.budget.amp)
        key = tuple(self.lineage.base_key) + tuple(key_parts)

        def train_on_own_data(model: nn.Module) -> None:
            train(model, self.data.train.epochs(key))
        if self.hooks.cached is not None:
            return self.hooks.cached(key, build, train_on_own_data)
        model = build()
        train_on_own_data(model)
        return model

    def memo(self, key: tuple, compute: Callable[[], object]):
        """``compute()`` once per sweep for ``key`` when the caller shares a dict."""
        if self.hooks.shared is None:
            return compute()
        if key not in self.hooks.shared:
            self.hooks.shared[key] = compute()
        return self.hooks.shared[key]

    def calibration(self, batches: int) -> list[torch.Tensor]:
        """The same ``batches`` training batches for every INT8 variant, on the CPU."""
        def draw():
            epoch = self.data.train.epochs(("calibration",))()
            return [x.cpu() for x, *_ in itertools.islice(epoch, batches)]
        return self.memo(("calibration", batches), draw)


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
    # The memory format its inputs should come in (channels-last for AMP on CUDA), or None.
    memory_format: torch.memory_format | None = None

    def autocast(self, device_type: str) -> AbstractContextManager:
        from optimizers.precision import autocast
        return autocast(device_type, self.autocast_dtype)


def iterate(batches: Iterable[Batch], device: torch.device) -> Iterator[Batch]:
    for batch in batches:
        yield tuple(t.to(device, non_blocking=True) for t in batch)


def forward_seen(model: nn.Module, example: torch.Tensor,
                 hook: Callable[[str, nn.Module, tuple], None],
                 names: Iterable[str] | None = None) -> None:
    """One no-grad forward pass of ``model`` on ``example`` with ``hook(name, module, args)``
    called before each module runs (only those in ``names`` when given): what the forward
    actually calls, and with what, rather than what the model holds."""
    wanted = None if names is None else set(names)
    handles = [m.register_forward_pre_hook(lambda m, args, name=name: hook(name, m, args))
               for name, m in model.named_modules() if wanted is None or name in wanted]
    try:
        with torch.no_grad():
            model(example)
    finally:
        for h in handles:
            h.remove()
