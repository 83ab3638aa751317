"""Settings of each technique: self-validating dataclasses whose fields carry their own metadata.

Every field is declared with ``setting(default, help, ...)``: its help text, bounds or
choices, whether it may be swept, its CLI flag and how its value reads in a variant's name.
That one declaration feeds the validation here, the CLI's flags and help, ``benchmarks list``,
the dashboard's widgets and their ranges, and the spec's ``to_dict``/``from_dict`` (in the
spirit of transformers' ``HfArgumentParser`` and optimum-benchmark's configs). Torch-free, so
the dashboard imports it without loading torch.

Allowed values sit in UPPER_CASE constants beside the dataclasses; a bad value is rejected
with a message that names the field, the accepted values and what was given. Other configs
declare their fields the same way (``benchmarks.spec.distributed``): a switch (``boolean``),
several distinct values (``many``: worker counts 1,2,4) or a fixed number of them
(``length``: C,H,W), fields the dashboard leaves to its operator (``form=False``) and test
hooks no front-end shows (``hidden``).
"""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, field, fields

PRUNE_METHODS = ("l1", "global", "channel")
# A language model's linear layers: by |weight| across the layer, or by Wanda's |weight| x
# the norm of its input feature over calibration text, compared within each output row;
# "-2:4" keeps 2 of every 4 consecutive weights of a row (half, whatever the ratio).
LM_PRUNE_METHODS = ("magnitude", "wanda", "magnitude-2:4", "wanda-2:4")
PRUNE_RATIO_RANGE = (0.0, 0.95)
TEMPERATURE_RANGE = (0.0, 100.0)  # open at 0: T divides the logits
AMP_DTYPES = ("fp16", "bf16")
INT8_MODES = ("dynamic", "static", "qat")
# A language model's linear layers (torchao): weights only, or weights and each token's
# activations (W8A8, the activations quantized on the fly).
LM_INT8_MODES = ("weight-only", "dynamic")
# INT4 weights in groups along the input dimension (torchao's CPU kernel takes these).
INT4_GROUP_SIZES = (32, 64, 128, 256)
EPOCHS_RANGE = (0, 1000)


def check_number(owner: str, name: str, value, low=None, high=None, *, integer=False,
                 low_open=False) -> None:
    """One shared range check so every message reads the same way."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            integer and not isinstance(value, int)) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(f"{owner}.{name} must be {kind}, got {value!r}")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and value > high
    if too_low or too_high:
        raise ValueError(f"{owner}.{name} must be {describe_range(low, high, low_open)}, "
                         f"got {value!r}")


def describe_range(low, high, low_open=False) -> str:
    lo = "" if low is None else (f"> {low}" if low_open else f">= {low}")
    hi = "" if high is None else f"<= {high}"
    return " and ".join(p for p in (lo, hi) if p)


def check_choice(owner: str, name: str, value, choices) -> None:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool) or \
            value not in choices:
        raise ValueError(
            f"{owner}.{name} must be one of {', '.join(map(str, choices))}; got {value!r}")


@dataclass(frozen=True)
class Setting:
    """What a settings field accepts and how every front-end shows it."""

    help: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    integer: bool = False
    choices: tuple | None = None
    # What a language model takes instead of ``choices`` (None: the same choices); the
    # settings accept either, and the run refuses the other family's (optimizers.registry).
    lm_choices: tuple | None = None
    text: bool = False           # a free name (a model name), checked where it is resolved
    nullable: bool = False       # None is accepted: it means what ``none_means`` says
    none_means: str | None = None
    sweep: bool = False          # may take a list or a range of values in one sweep
    flag: str | None = None      # the CLI flag; default --{technique}-{field}
    label: str | None = None     # how a value reads in a variant's name, e.g. "T{}"
    step: float | None = None    # the widget's step
    advanced: bool = False       # shown under "more settings" rather than up front
    boolean: bool = False        # on or off: a bare CLI switch, a toggle
    many: bool = False           # the value is a tuple of distinct values: 1,2,4
    length: int | None = None    # the value is a tuple of exactly this many values: C,H,W
    suggested: tuple | None = None  # what a menu offers for a many-valued number
    metavar: str | None = None   # how the CLI's help shows a value (HOST:PORT)
    form: bool = True            # False: the CLI's (or the operator's), not the dashboard's
    hidden: bool = False         # a test hook: accepted, never shown in help or on a page
    # What ``recommend`` searches (benchmarks.recommend.space): the range it explores, inside
    # the bounds (None: the bounds), and whether the value is a training budget, which
    # successive halving builds at fewer epochs first to drop bad trials cheaply.
    search: tuple | None = None
    fidelity: bool = False
    # The range a page's sweep opens with (from, to; five points): where the trade-off
    # happens, e.g. prune ratio 0.3-0.9 rather than a no-op 0 up to 0.5. None: from the low
    # bound to the default. The CLI's single default is unchanged by it.
    sweep_range: tuple | None = None

    def __post_init__(self):
        if self.sweep_range is not None and (
                len(self.sweep_range) != 2 or self.sweep_range[0] >= self.sweep_range[1]
                or (self.low is not None and self.sweep_range[0] < self.low)
                or (self.high is not None and self.sweep_range[1] > self.high)):
            raise ValueError(f"a setting's sweep range must lie within its bounds "
                             f"[{self.low}, {self.high}]; got {self.sweep_range!r}")
        if self.search is not None and (
                len(self.search) != 2 or self.search[0] > self.search[1]
                or (self.low is not None and self.search[0] < self.low)
                or (self.high is not None and self.search[1] > self.high)):
            raise ValueError(f"a setting's search range must lie within its bounds "
                             f"[{self.low}, {self.high}]; got {self.search!r}")

    @property
    def kind(self) -> str:
        if self.boolean:
            return "bool"
        if self.choices is not None:
            return "choice"
        if self.text:
            return "text"
        return "int" if self.integer else "float"

    @property
    def all_choices(self) -> tuple:
        """Every value of a choice, an image model's then a language model's."""
        return tuple(dict.fromkeys((*(self.choices or ()), *(self.lm_choices or ()))))

    def family_choices(self, family: str) -> tuple:
        """The values a model of ``family`` ("image" or "lm") takes."""
        return self.lm_choices if family == "lm" and self.lm_choices is not None \
            else self.choices

    @property
    def several(self) -> bool:
        """Whether the value is a tuple (``many`` or ``length``)."""
        return self.many or self.length is not None

    def check(self, owner: str, name: str, value) -> None:
        if value is None:
            if self.nullable:
                return
            raise ValueError(f"{owner}.{name} must be given, got None")
        if not self.several:
            self._check_one(owner, name, value)
            return
        if not isinstance(value, (tuple, list)):
            raise ValueError(f"{owner}.{name} must be {self.accepted()}; got {value!r}")
        for item in value:
            self._check_one(owner, name, item)
        if (self.length is not None and len(value) != self.length) or (
                self.many and (not value or len(set(value)) != len(value))):
            raise ValueError(f"{owner}.{name} must be {self.accepted()}; got {value!r}")

    def _check_one(self, owner: str, name: str, value) -> None:
        if self.boolean:
            if not isinstance(value, bool):
                raise ValueError(f"{owner}.{name} must be true or false, got {value!r}")
        elif self.choices is not None:
            if value not in self.all_choices:  # both families' values, each named as such
                lm = f" (a language model: {', '.join(map(str, self.lm_choices))})" \
                    if self.lm_choices is not None else ""
                raise ValueError(f"{owner}.{name} must be one of "
                                 f"{', '.join(map(str, self.choices))}{lm}; got {value!r}")
            check_choice(owner, name, value, self.all_choices)
        elif self.text:
            if not isinstance(value, str) or not value.strip() or "\x00" in value:
                raise ValueError(f"{owner}.{name} must be a non-empty name, got {value!r}")
        else:
            check_number(owner, name, value, self.low, self.high, integer=self.integer,
                         low_open=self.low_open)

    def accepted(self) -> str:
        """The accepted values in words, for help texts and messages."""
        if self.boolean:
            text = "on or off"
        elif self.choices is not None:
            text = "|".join(map(str, self.choices))
            if self.lm_choices is not None:
                text += "; a language model: " + "|".join(map(str, self.lm_choices))
        elif self.text:
            text = self.metavar or "a name"
        else:
            text = ("an integer " if self.integer else "a number ") + \
                describe_range(self.low, self.high, self.low_open)
        if self.many:
            text += ", one or more distinct, comma-separated"
        elif self.length is not None:
            text += f", {self.length} of them comma-separated"
        return text + (f"; unset: {self.none_means}" if self.nullable and self.none_means
                       else "")

    def format(self, value) -> str:
        """A value as it reads in a name: 0.5 -> '0.5', 4.0 -> '4'."""
        text = f"{value:g}" if isinstance(value, float) else str(value)
        return (self.label or "{}").format(text)


def setting(default, help: str, **meta):
    """A dataclass field carrying its ``Setting`` metadata."""
    return field(default=default, metadata={"setting": Setting(help, **meta)})


def setting_fields(settings_type) -> list[tuple[str, Setting, object]]:
    """(name, Setting, default) of every declared field, in declaration order."""
    out = []
    for f in fields(settings_type):
        meta = f.metadata.get("setting")
        if meta is not None:
            out.append((f.name, meta, None if f.default is MISSING else f.default))
    return out


def check_settings(obj, owner: str) -> None:
    for name, meta, _ in setting_fields(type(obj)):
        meta.check(owner, name, getattr(obj, name))


@dataclass(frozen=True)
class PruneSettings:
    ratio: float = setting(
        0.5, "fraction of weights removed (l1/global) or of channels removed (channel)",
        low=PRUNE_RATIO_RANGE[0], high=PRUNE_RATIO_RANGE[1], sweep=True, flag="--prune",
        step=0.05, search=(0.1, 0.9), sweep_range=(0.3, 0.9))
    method: str = setting(
        "l1", "l1: per layer (the article's); global: ranked across layers; channel: "
        "structured, the layers shrink (Torch-Pruning)", choices=PRUNE_METHODS, sweep=True,
        lm_choices=LM_PRUNE_METHODS)
    # A short fine-tune recovers most of the accuracy pruning costs; its budget is recorded.
    finetune_epochs: int = setting(
        2, "epochs of fine-tuning after pruning (0: none)", low=EPOCHS_RANGE[0],
        high=EPOCHS_RANGE[1], integer=True, sweep=True, flag="--finetune-epochs",
        label="ft{}", step=1, advanced=True, search=(0, 3), fidelity=True)
    # A per-group schedule (``optimizers.schedules``; `run --schedule FILE` sets it): each
    # group it names loses its own fraction, every other group ``ratio``.
    schedule: str | None = setting(
        None, "a per-group schedule (JSON, from `compression-bench sensitivity`)", text=True,
        nullable=True, none_means="every group at the ratio", flag="--prune-schedule",
        form=False, hidden=True)

    def __post_init__(self):
        check_settings(self, "prune")
        _check_schedule(self, "prune", "method")
        if self.method.endswith("-2:4") and self.ratio != 0.5:
            raise ValueError(f"prune.method {self.method} removes 2 of every 4 weights: its "
                             f"ratio is 0.5; got {self.ratio:g}")


@dataclass(frozen=True)
class DistillSettings:
    temperature: float = setting(
        4.0, "softmax temperature T of the teacher's and student's logits",
        low=TEMPERATURE_RANGE[0], high=TEMPERATURE_RANGE[1], low_open=True, sweep=True,
        flag="--temperature", label="T{}", step=0.5, search=(1.0, 8.0))
    alpha: float = setting(
        0.7, "weight of the teacher's soft targets (1 - alpha: the labels)", low=0.0, high=1.0,
        sweep=True, flag="--alpha", label="a{}", step=0.05)
    student: str | None = setting(
        None, "the student model", text=True, nullable=True,
        none_means="the teacher's smaller sibling (resnet50 -> resnet18, zoo: its narrow twin)", sweep=True,
        flag="--student", label="{}")
    epochs: int | None = setting(
        None, "epochs of student training", low=1, high=EPOCHS_RANGE[1], integer=True,
        nullable=True, none_means="the sweep's training budget (--epochs)",
        label="e{}", step=1, advanced=True, fidelity=True)

    def __post_init__(self):
        check_settings(self, "distill")


@dataclass(frozen=True)
class AmpSettings:
    dtype: str | None = setting(
        None, "autocast dtype", choices=AMP_DTYPES, nullable=True,
        none_means="fp16 on CUDA, bf16 on the CPU", sweep=True, flag="--amp")

    def __post_init__(self):
        check_settings(self, "amp")

    # fp16 CPU kernels are scarce and bf16 keeps fp32's exponent range: bf16 on the CPU.
    def resolved(self, device_type: str) -> str:
        return self.dtype or ("fp16" if device_type == "cuda" else "bf16")


@dataclass(frozen=True)
class Int8Settings:
    mode: str = setting(
        "static", "dynamic: weights only; static: calibrated activations too; qat: "
        "quantization-aware fine-tuning", choices=INT8_MODES, sweep=True, flag="--int8",
        lm_choices=LM_INT8_MODES)
    calibration_batches: int = setting(
        8, "batches of the training split that calibrate static INT8", low=1, high=10_000,
        integer=True, sweep=True, flag="--calibration-batches", label="cal{}", step=1,
        advanced=True, search=(1, 16))
    qat_epochs: int = setting(
        1, "epochs of quantization-aware fine-tuning", low=1, high=EPOCHS_RANGE[1],
        integer=True, flag="--qat-epochs", label="qe{}", step=1, advanced=True, fidelity=True)
    # A per-group schedule (``optimizers.schedules``; `run --schedule FILE` sets it): the
    # groups at 0 stay float, the others are quantized.
    schedule: str | None = setting(
        None, "a per-group schedule (JSON, from `compression-bench sensitivity`)", text=True,
        nullable=True, none_means="every group quantized", flag="--int8-schedule",
        form=False, hidden=True)

    def __post_init__(self):
        check_settings(self, "int8")
        _check_schedule(self, "int8", "mode")


@dataclass(frozen=True)
class Int4Settings:
    """INT4 weight-only quantization of a language model's linear layers (torchao)."""
    group_size: int = setting(
        128, "weights per group sharing one scale and zero point along the input dimension; "
        "smaller groups: finer scales, more of them to store", low=INT4_GROUP_SIZES[0],
        high=INT4_GROUP_SIZES[-1], integer=True, sweep=True, flag="--int4", label="g{}",
        step=32)

    def __post_init__(self):
        check_settings(self, "int4")
        if self.group_size not in INT4_GROUP_SIZES:
            raise ValueError(f"int4.group_size must be one of "
                             f"{', '.join(map(str, INT4_GROUP_SIZES))}; got {self.group_size}")


def _check_schedule(settings, owner: str, field_name: str) -> None:
    """A schedule is held as its canonical JSON text, written for this technique's method or
    mode (a prune.channel schedule needs method channel)."""
    if settings.schedule is None:
        return
    from optimizers.schedules import SCHEDULE_TECHNIQUES, canonical, parse_schedule
    try:
        doc = parse_schedule(settings.schedule)
    except ValueError as exc:
        raise ValueError(f"{owner}.schedule: {exc}") from None
    technique, name, value = doc["technique"], *SCHEDULE_TECHNIQUES[doc["technique"]][1:]
    if SCHEDULE_TECHNIQUES[technique][0] != owner or getattr(settings, field_name) != value:
        raise ValueError(f"{owner}.schedule is a {technique} schedule; it needs {owner}."
                         f"{name} {value}, got {getattr(settings, field_name)!r}")
    object.__setattr__(settings, "schedule", canonical(doc))
