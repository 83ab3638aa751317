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
from dataclasses import dataclass, field, fields
from importlib import import_module

from optimizers.settings import (
    AmpSettings,
    DistillSettings,
    Int4Settings,
    Int8Settings,
    PruneSettings,
    Setting,
    setting_fields,
)


# How an export rebuilds a technique's result from its stored weights (benchmarks.export):
# "weights": the float module tree with its trained weights (pruned shapes, a student);
# "convert": a conversion applied on top of float weights, redone on load (INT8's modules);
# "runtime": how the float model runs, not in its weights (AMP's autocast).
EXPORT_KINDS = ("weights", "convert", "runtime")
# The model families a technique applies to: image classifiers (the engine's sweeps) and causal
# language models (benchmarks.run.lm_runner), each through its own apply.
FAMILIES = ("image", "lm")


@dataclass(frozen=True)
class Preflight:
    """What a technique's preflight may ask about the sweep, before anything runs: its model,
    its training budget, and the engine's model lookups (passed in: the optimizers never
    import the engine)."""
    model: str
    epochs: int
    check_model: Callable[[str], None]
    default_student: Callable[[str], str | None]
    chain: tuple[str, ...] = ()    # the techniques of the variant, in chain order


def _none(*_):
    return None


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
    # The model its result is, from its recorded config: (config) -> name or None (the
    # sweep's model).
    architecture: Callable[[dict], str | None] = _none

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
    # The precision its result runs in, from the config it recorded: (config) -> "int8",
    # "bf16"... or None (the precision of what it was applied to stands).
    precision: Callable[[dict], str | None] = _none
    export: str = "weights"                   # one of EXPORT_KINDS
    # For "convert": (float model, its recorded config, an example input) -> the module
    # structure its weights load into, redone by an export's rebuild.
    convert: str | Callable | None = None
    not_exported: dict = field(default_factory=dict)  # format -> why it cannot carry it
    export_notes: dict = field(default_factory=dict)  # format -> what a reader must know
    cpu_only: bool = False                    # its kernels run on the CPU whatever the sweep
    # The model its result is (distillation's student): (config) -> name or None.
    architecture: Callable[[dict], str | None] = _none
    # Refusals before anything runs: (settings, Preflight) -> None, raising ValueError.
    preflight: Callable[[object, Preflight], None] | None = None
    # The autocast dtype a chain that includes it fine-tunes under on a device type:
    # (settings, device_type) -> "fp16" or None.
    train_dtype: Callable[[object, str], str | None] = _none
    cost_fields: tuple[str, ...] = ()         # the settings that most change its cost
    families: tuple[str, ...] = ("image",)    # which of FAMILIES it applies to
    # For a language model: (model, settings, calibration ids) -> (model, config), a copy.
    lm_apply: str | Callable | None = None
    lm_description: str | None = None         # what it does to a language model

    def __post_init__(self):
        if not self.families or set(self.families) - set(FAMILIES):
            raise ValueError(f"technique {self.name}: families must be among "
                             f"{', '.join(FAMILIES)}; got {self.families!r}")
        if ("lm" in self.families) != (self.lm_apply is not None):
            raise ValueError(f"technique {self.name}: a language-model technique needs its "
                             f"lm_apply, and only it has one")
        if self.export not in EXPORT_KINDS:
            raise ValueError(f"technique {self.name}: export must be one of "
                             f"{', '.join(EXPORT_KINDS)}; got {self.export!r}")
        if (self.export == "convert") != (self.convert is not None):
            raise ValueError(f"technique {self.name}: a convert export needs its convert "
                             f"function, and only it has one")

    def convert_fn(self) -> Callable:
        return _resolve(self.convert)

    def apply_fn(self) -> Callable:
        return _resolve(self.apply)

    def lm_apply_fn(self) -> Callable:
        return _resolve(self.lm_apply)

    def check_family(self, settings, family: str) -> None:
        """Refuse, in one line, settings a model of ``family`` cannot take: the technique
        itself, or a choice that is the other family's (``int8`` weight-only on an image
        model, ``static`` on a language model)."""
        what = "a language model" if family == "lm" else "an image model"
        if family not in self.families:
            takes = ", ".join(t.name for t in techniques(family))
            raise ValueError(f"{self.name} does not apply to {what}; it takes {takes}")
        for name, meta, _ in self.fields():
            value = getattr(settings, name)
            if meta.choices is None or value is None:
                continue
            allowed = meta.family_choices(family)
            if value not in allowed:
                raise ValueError(f"{self.flag(name)} {value} is not for {what}; it takes "
                                 f"{', '.join(map(str, allowed))}")

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


def techniques(family: str | None = None) -> list[Technique]:
    """Every technique, in chain order; with ``family``, those that apply to it."""
    return sorted((t for t in _TECHNIQUES.values() if family is None or family in t.families),
                  key=lambda t: (t.order, t.name))


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
# Order: prune -> distill -> int8 -> int4 -> amp. Pruning removes weights; distillation then
# recovers the pruned model from its unpruned teacher; INT8 (or a language model's INT4)
# quantizes the recovered weights; AMP last only sets the autocast dtype at run time.

def _student(config: dict) -> str | None:
    # After pruning, distillation recovers the pruned model itself (the teacher's tree).
    return None if config.get("mode") == "recover" else config.get("student")


def _check_student(settings, sweep: Preflight) -> None:
    """The student must exist before anything runs: a bad name is the user's mistake. After
    pruning in a chain, the pruned model is the student (``distillation.apply``)."""
    chain = sweep.chain
    if "distill" in chain and "prune" in chain[:chain.index("distill")]:
        return
    student = settings.student or sweep.default_student(sweep.model)
    if student is None:
        raise ValueError(f"model {sweep.model} has no obvious smaller sibling to distil into; "
                         f"give --student (a zoo name, torchvision:NAME, timm:NAME or "
                         f"FILE.py:FACTORY)")
    sweep.check_model(student)
    if sweep.epochs == 0 and settings.epochs is None:
        raise ValueError("distillation trains its student for --epochs, which is 0 here; "
                         "give --distill-epochs N")


def _int8_precision(config: dict) -> str | None:
    # torchao's pt2e reference graph computes in float between quantize/dequantize ops.
    return None if config.get("path") in ("pt2e", "pt2e-qat") else "int8"


def _amp_precision(config: dict) -> str | None:
    return None if config.get("skipped") else config.get("dtype")


register(Technique(
    "prune", PruneSettings, 10, "optimizers.pruning:apply",
    "pruning: l1 (per layer), global (across layers), channel (structured)",
    switch="ratio", label_fields=("method", "ratio"),
    trains=lambda s: s.finetune_epochs > 0, cost_fields=("method",),
    families=("image", "lm"), lm_apply="optimizers.lm:prune",
    lm_description="pruning of the decoder's linear layers: magnitude, or Wanda (|weight| x "
                   "its input's norm over calibration text); unstructured or 2:4"))
register(Technique(
    "distill", DistillSettings, 20, "optimizers.distillation:apply",
    "knowledge distillation of a smaller student (after pruning: recovers the pruned model)",
    label_fields=("temperature",),
    control=Control("student-scratch", "distill", ("student", "epochs"),
                    "optimizers.distillation:train_scratch",
                    "the same student, budget and seed trained without the teacher",
                    architecture=lambda config: config.get("student")),
    architecture=_student, preflight=_check_student))
register(Technique(
    "int8", Int8Settings, 30, "optimizers.quantization:apply",
    "INT8 quantization (PyTorch's x86 kernels, on the CPU)", switch="mode",
    label_fields=("mode",), trains=lambda s: s.mode == "qat", precision=_int8_precision,
    export="convert", convert="optimizers.quantization:rebuild_structure", cpu_only=True,
    not_exported={"onnx": "ONNX is written for float variants: this INT8 variant runs "
                          "PyTorch's quantized CPU kernels (weights packed for the x86 "
                          "engine), which torch.onnx does not translate"},
    export_notes={"pt2": "quantize/dequantize ops: import torch.ao.quantization.fx._decomposed "
                         "before torch.export.load (benchmarks.export.load.load_program does)"},
    families=("image", "lm"), lm_apply="optimizers.lm:int8",
    lm_description="INT8 of the decoder's linear layers (torchao): weights only, or W8A8 "
                   "with each token's activations quantized on the fly"))
register(Technique(
    "int4", Int4Settings, 35, "optimizers.lm:not_for_images",
    "INT4 weight-only quantization of a language model's linear layers (torchao, in groups)",
    switch="group_size", label_fields=("group_size",), trains=lambda s: False,
    export="runtime", families=("lm",), lm_apply="optimizers.lm:int4"))
register(Technique(
    "amp", AmpSettings, 40, "optimizers.amp:apply",
    "automatic mixed precision at inference (torch.amp autocast)", switch="dtype",
    label_fields=("dtype",), trains=lambda s: False, precision=_amp_precision,
    export="runtime",
    # A chain that ends in fp16 AMP on CUDA fine-tunes under autocast with a GradScaler.
    train_dtype=lambda s, device_type: "fp16" if device_type == "cuda"
    and s.resolved("cuda") == "fp16" else None,
    families=("image", "lm"), lm_apply="optimizers.lm:amp",
    lm_description="bf16 autocast on the CPU, the logits handed back in fp32"))
