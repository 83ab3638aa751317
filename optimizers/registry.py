"""The technique registry: the one home of the techniques' vocabulary.

Each technique declares its name, its settings dataclass (whose fields carry their metadata,
``optimizers.settings``), its place in a chain, how it is switched on, which settings show in
a variant's name, and where its ``apply`` lives (imported on first use, so this module and
everything that lists techniques stay torch-free). A technique may bring a *control*: a
variant that isolates its effect (distillation's ``student-scratch``, the same student trained
without the teacher).

The CLI's flags and help, ``benchmarks list``, the spec's ``to_dict``/``from_dict``, the
dashboard's widgets and the chain's dispatch all read this registry, so adding a technique is
its module plus one ``register`` call (see docs/ARCHITECTURE.md and
tests/unit/optimizers/test_registry.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from importlib import import_module

from optimizers.settings import (
    AmpSettings,
    DistillSettings,
    Int8Settings,
    PruneSettings,
    Setting,
    setting_fields,
)


def _resolve(target: str | Callable) -> Callable:
    """"package.module:function" -> the function (imported now); a callable as it is."""
    if callable(target):
        return target
    module, _, name = target.partition(":")
    return getattr(import_module(module), name)


@dataclass(frozen=True)
class Control:
    """A variant that isolates a technique's effect, built from a subset of its settings."""

    name: str                  # its name and its ``techniques`` entry in the JSON
    of: str                    # the technique it controls
    uses: tuple[str, ...]      # the settings fields it depends on (the others do not matter)
    apply: str | Callable      # (settings, ctx) -> Outcome
    description: str

    def apply_fn(self) -> Callable:
        return _resolve(self.apply)

    def config(self, settings) -> dict:
        return {name: getattr(settings, name) for name in self.uses}


@dataclass(frozen=True)
class Technique:
    name: str
    settings: type
    order: int                     # its place in a chain: lower runs first
    apply: str | Callable          # (model, settings, ctx) -> Outcome; never mutates model
    description: str
    switch: str | None = None      # the field whose flag turns it on; None: a bare --NAME flag
    label_fields: tuple[str, ...] = ()  # always in its variants' names
    control: Control | None = None
    # Whether applying it with these settings trains weights (what an executor sends to
    # another process or node to build): (settings) -> bool.
    trains: Callable[[object], bool] = lambda settings: True

    def apply_fn(self) -> Callable:
        return _resolve(self.apply)

    def fields(self) -> list[tuple[str, Setting, object]]:
        return setting_fields(self.settings)

    def field(self, name: str) -> Setting:
        for field_name, meta, _ in self.fields():
            if field_name == name:
                return meta
        raise ValueError(f"{self.name} has no setting {name!r}; it has "
                         f"{', '.join(n for n, _, _ in self.fields())}")

    def flag(self, field_name: str) -> str:
        meta = self.field(field_name)
        return meta.flag or f"--{self.name}-{field_name.replace('_', '-')}"

    @property
    def switch_flag(self) -> str:
        return self.flag(self.switch) if self.switch else f"--{self.name}"

    def make(self, values: dict):
        """Settings from plain data: unknown keys are refused by name, as bad input."""
        known = {f.name for f in fields(self.settings)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{self.name} has no setting {unknown[0]!r}; it has "
                             f"{', '.join(sorted(known))}")
        return self.settings(**values)

    def label(self, settings, varying: frozenset[str] | set[str] = frozenset()) -> str:
        """The variant name's part for these settings: the label fields, plus any other field
        that varies across the sweep (so every name in a sweep is distinct)."""
        shown = list(self.label_fields) + [n for n, _, _ in self.fields()
                                           if n in varying and n not in self.label_fields]
        parts = [self.name]
        for name in shown:
            value = getattr(settings, name)
            if value is not None:
                parts.append(self.field(name).format(value))
        return "-".join(parts)


_TECHNIQUES: dict[str, Technique] = {}


def register(technique: Technique) -> Technique:
    if technique.name in _TECHNIQUES or any(
            t.control and t.control.name == technique.name for t in _TECHNIQUES.values()):
        raise ValueError(f"technique {technique.name!r} is registered already")
    _TECHNIQUES[technique.name] = technique
    return technique


def unregister(name: str) -> None:
    """For tests that register a toy technique."""
    _TECHNIQUES.pop(name, None)


def techniques() -> list[Technique]:
    """Every technique, in chain order."""
    return sorted(_TECHNIQUES.values(), key=lambda t: (t.order, t.name))


def names() -> tuple[str, ...]:
    return tuple(t.name for t in techniques())


def get(name: str) -> Technique:
    if name not in _TECHNIQUES:
        raise ValueError(f"technique must be one of {', '.join(names())}; got {name!r}")
    return _TECHNIQUES[name]


def controls() -> dict[str, Control]:
    return {t.control.name: t.control for t in techniques() if t.control is not None}


def control(name: str) -> Control | None:
    return controls().get(name)


def by_settings_type(settings) -> Technique:
    for t in techniques():
        if isinstance(settings, t.settings):
            return t
    raise ValueError(f"no registered technique takes {type(settings).__name__}")


def label_of(name: str, settings) -> str:
    return get(name).label(settings)


def check_order(steps: list[str] | tuple[str, ...]) -> None:
    """Each technique once, in chain order; messages name the order expected."""
    for name in steps:
        get(name)
    if len(set(steps)) != len(steps):
        raise ValueError(f"a chain applies each technique once; got {', '.join(steps)}")
    order = [t.name for t in techniques()]
    if list(steps) != sorted(steps, key=order.index):
        raise ValueError(f"chain order must follow {' -> '.join(order)}; "
                         f"got {' -> '.join(steps)}")


# -- the built-in techniques -----------------------------------------------------------------
# Order: prune -> distill -> int8 -> amp. Pruning removes weights; distillation then recovers
# the pruned model from its unpruned teacher; INT8 quantizes the recovered weights; AMP last
# only sets the autocast dtype at run time.

register(Technique(
    "prune", PruneSettings, 10, "optimizers.pruning:apply",
    "pruning: l1 (per layer), global (across layers), channel (structured)",
    switch="ratio", label_fields=("method", "ratio"),
    trains=lambda s: s.finetune_epochs > 0))
register(Technique(
    "distill", DistillSettings, 20, "optimizers.distillation:apply",
    "knowledge distillation of a smaller student (after pruning: recovers the pruned model)",
    label_fields=("temperature",),
    control=Control("student-scratch", "distill", ("student", "epochs"),
                    "optimizers.distillation:train_scratch",
                    "the same student, budget and seed trained without the teacher")))
register(Technique(
    "int8", Int8Settings, 30, "optimizers.quantization:apply",
    "INT8 quantization (PyTorch's x86 kernels, on the CPU)", switch="mode",
    label_fields=("mode",), trains=lambda s: s.mode == "qat"))
register(Technique(
    "amp", AmpSettings, 40, "optimizers.amp:apply",
    "automatic mixed precision at inference (torch.amp autocast)", switch="dtype",
    label_fields=("dtype",), trains=lambda s: False))
