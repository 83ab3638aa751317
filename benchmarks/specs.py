"""What a sweep is asked to build: self-validating, hashable configs.

The techniques' vocabulary (names, settings, their bounds, flags and chain order) comes from
the technique registry (``optimizers.registry``); nothing here names a technique. Every
other allowed value sits in an UPPER_CASE constant beside the dataclass that uses it, and
``__post_init__`` rejects a bad value with a message naming the field, the accepted values and
what was given. The engine raises ``ValueError`` for bad input; the CLI turns it into one line
and exit status 2, the dashboard into ``st.error``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from optimizers import registry
from optimizers.settings import (  # noqa: F401  (re-exported: the engine's vocabulary)
    AMP_DTYPES, INT8_MODES, PRUNE_METHODS, PRUNE_RATIO_RANGE, AmpSettings, DistillSettings,
    Int8Settings, PruneSettings, check_choice, check_number)

DEVICES = ("auto", "cpu", "cuda")
# Data sets the loader knows (benchmarks.datasets); here so menus list them without numpy.
DATASETS = ("digits", "cifar10", "imagefolder:DIR", "synthetic")
# Gradient compressions of the distributed benchmark (DDP communication hooks).
COMPRESSIONS = ("none", "fp16", "bf16")
# Above this many variants a sweep is refused before anything runs (--max-variants).
DEFAULT_MAX_VARIANTS = 64
MAX_SEEDS = 10
# How inputs are scaled before the model sees them: the training split's per-channel
# statistics, nothing (pixels in [0, 1]), ImageNet's, or explicit MEAN,STD (one number for
# every channel, or per channel joined by ':', e.g. 0.485:0.456:0.406,0.229:0.224:0.225).
NORMALIZE_MODES = ("dataset", "none", "imagenet")
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
# Label sets of an image folder besides its own class folders (benchmarks.inputs).
LABELS = ("imagenet",)
# Model sources that take --weights: their pretrained files (benchmarks.hub_models).
WEIGHTS_SOURCES = ("torchvision", "timm")
# Timing: every variant is built first, then timed in this many round-robin rounds.
TIMING_MODES = ("interleaved", "sequential")
FP32_MODES = ("ieee", "tf32")  # benchmarks.environment.apply_precision sets them
DEFAULT_TIMING_ROUNDS = 5


def expand_range(start: float, stop: float, count: int, integer: bool = False) -> tuple:
    """``count`` values evenly spaced from ``start`` to ``stop``, both included (integers
    rounded for integer settings): what ``--prune 0.1:0.9:5`` means."""
    if count < 1:
        raise ValueError(f"a range needs at least 1 point, got {count}")
    if count == 1:
        values = [start]
    else:
        step = (stop - start) / (count - 1)
        values = [start + i * step for i in range(count)]
    if integer:
        return tuple(int(round(v)) for v in values)
    return tuple(round(v, 10) for v in values)


def parse_normalize(text) -> tuple[str, tuple | None, tuple | None]:
    """(mode, mean, std) from --normalize's text; ValueError names the accepted forms."""
    accepted = (f"{'|'.join(NORMALIZE_MODES)}|MEAN,STD (numbers, or per channel joined by "
                f"':')")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"normalize must be {accepted}; got {text!r}")
    text = text.strip()
    if text in NORMALIZE_MODES:
        return text, None, None
    parts = text.split(",")
    try:
        mean, std = (tuple(float(v) for v in p.split(":")) for p in parts) \
            if len(parts) == 2 else (None, None)
    except ValueError:
        mean = std = None
    if mean is None or len(mean) != len(std) or not all(math.isfinite(v) for v in mean + std) \
            or any(v <= 0 for v in std):
        raise ValueError(f"normalize must be {accepted} with every std > 0; got {text!r}")
    return "explicit", mean, std


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def _plain(value):
    """Settings values as JSON keeps them (tuples become lists)."""
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True, init=False)
class VariantSpec:
    """One variant: the techniques it applies, in chain order, with their settings; or one
    technique's control (e.g. ``student-scratch``), built from that technique's settings.

    ``VariantSpec("p", ("prune",), prune=PruneSettings(0.5))`` names settings by technique;
    ``settings={"prune": ...}`` does the same for any registered technique. ``axes`` says where
    the variant sits on each swept setting (``{"prune.ratio": 0.6}``)."""

    name: str
    techniques: tuple[str, ...]
    settings: tuple[tuple[str, object], ...]
    axes: tuple[tuple[str, object], ...]

    def __init__(self, name: str, techniques=(), settings: Mapping | None = None, *,
                 axes: Mapping | None = None, **by_technique):
        merged = dict(settings or {})
        for key, value in by_technique.items():
            registry.get(key)  # an unknown keyword is an unknown technique
            if value is not None:
                merged[key] = value
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "techniques", tuple(techniques))
        object.__setattr__(self, "axes", tuple(sorted((axes or {}).items())))
        order = registry.names()
        object.__setattr__(self, "settings", tuple(sorted(
            merged.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else -1)))
        self._validate()

    def _validate(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"variant.name must be a non-empty string, got {self.name!r}")
        given = dict(self.settings)
        for name, value in given.items():
            expected = registry.get(name).settings
            if not isinstance(value, expected):
                raise ValueError(f"variant {self.name!r}: {name} needs {expected.__name__}, "
                                 f"got {type(value).__name__}")
        control = self.control
        if control is not None:
            if len(self.techniques) != 1:
                raise ValueError(f"variant.techniques: {control.name} is a control and "
                                 f"stands alone")
            if control.of not in given:
                raise ValueError(f"variant {self.name!r} is the {control.name} control but has "
                                 f"no {control.of} settings")
            return
        allowed = registry.names() + tuple(registry.controls())
        for t in self.techniques:
            check_choice("variant", "techniques", t, allowed)
        if len(set(self.techniques)) != len(self.techniques):
            raise ValueError(f"variant.techniques must not repeat, got {list(self.techniques)}")
        for t in self.techniques:
            if t not in given:
                raise ValueError(f"variant {self.name!r} applies {t} but has no {t} settings")
        order = [t for t in registry.names() if t in self.techniques]
        if list(self.techniques) != order:
            raise ValueError(f"variant.techniques must follow the order "
                             f"{' -> '.join(registry.names())}; got {list(self.techniques)}")

    def __getattr__(self, name: str):
        # v.prune, v.distill...: the settings of a registered technique, or None.
        if name.startswith("_") or name not in registry.names():
            raise AttributeError(name)
        return dict(self.settings).get(name)

    @property
    def control(self) -> registry.Control | None:
        """The control this variant is (e.g. distillation's student-scratch), or None."""
        if len(self.techniques) == 1:
            return registry.control(self.techniques[0])
        return None

    @property
    def steps(self) -> list[tuple[str, object]]:
        """(technique, settings) in chain order, as ``optimizers.chain`` applies them."""
        given = dict(self.settings)
        return [(t, given[t]) for t in self.techniques]

    def config(self) -> dict:
        """The settings this variant uses, as plain data: a control lists only the settings
        it depends on (the scratch student does not use a temperature)."""
        control = self.control
        if control is not None:
            return {control.name: control.config(dict(self.settings)[control.of])}
        return {t: {k: _plain(v) for k, v in asdict(s).items()} for t, s in self.steps}

    @property
    def trains(self) -> bool:
        """Whether building it trains weights (the baseline's are trained apart)."""
        if self.control is not None:
            return True
        return any(registry.get(t).trains(s) for t, s in self.steps)

    def axes_dict(self) -> dict:
        return dict(self.axes)

    def stable_hash(self) -> str:
        """Same settings, same hash, across processes and runs."""
        payload = {"techniques": list(self.techniques), **self.config()}
        return hashlib.sha256(_canonical(payload).encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        out = {"name": self.name, "techniques": list(self.techniques),
               "settings": {t: asdict(s) for t, s in self.settings}}
        if self.axes:
            out["axes"] = self.axes_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "VariantSpec":
        techniques = tuple(data.get("techniques") or ())
        raw = data.get("settings") or {}
        settings = {}
        for name, values in raw.items():
            control = registry.control(name)
            technique = registry.get(control.of if control else name)
            settings[technique.name] = technique.make(dict(values))
        return cls(data["name"], techniques, settings, axes=data.get("axes"))


BASELINE = VariantSpec(name="baseline")


# -- planning a sweep from toggles and axes --------------------------------------------------

Choice = dict  # {(technique, field): tuple of values}; one value, or several for an axis


def _values(value) -> tuple:
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


def _check_axis(technique: registry.Technique, field: str, values: tuple) -> None:
    meta = technique.field(field)
    flag = technique.flag(field)
    if not values:
        raise ValueError(f"{flag} needs at least one value")
    if len(values) > 1 and not meta.sweep:
        raise ValueError(f"{flag} takes one value (it cannot be swept); got "
                         f"{', '.join(map(str, values))}")
    for v in values:
        meta.check(technique.name, field, v)
    if len(set(values)) != len(values):
        twice = next(v for i, v in enumerate(values) if v in values[:i])
        raise ValueError(f"{flag} lists {twice!r} twice; give each value once")


def plan_variants(choices: Mapping[tuple[str, str], object], enabled: set[str] | list[str], *,
                  combine: bool = False, max_variants: int = DEFAULT_MAX_VARIANTS
                  ) -> tuple[VariantSpec, ...]:
    """The variants of a sweep: the baseline; for each enabled technique, one variant per
    point of the cross product of its values (``--prune 0.2,0.4 --prune-method l1,channel``:
    four); each technique's control once per distinct setting it depends on; with ``combine``,
    one chained variant per point of the cross product of every enabled technique's values.
    Values are checked against their settings' bounds before anything runs."""
    enabled = [t.name for t in registry.techniques() if t.name in set(enabled)]
    for name in set(enabled) - set(registry.names()):
        registry.get(name)
    for (name, field), value in choices.items():
        technique = registry.get(name)
        if name not in enabled and len(_values(value)) > 1:
            raise ValueError(f"{technique.flag(field)} sweeps {technique.name}, which is off; "
                             f"add {technique.switch_flag}")
    if combine and len(enabled) < 2:
        flags = ", ".join(t.switch_flag for t in registry.techniques())
        raise ValueError(f"combine needs at least two enabled techniques ({flags})")

    per_technique: dict[str, list[tuple[object, dict]]] = {}
    varying: dict[str, set[str]] = {}
    for name in enabled:
        technique = registry.get(name)
        axes: list[tuple[str, tuple]] = []
        # Label fields vary slowest, so a sweep reads method by method, ratio by ratio.
        ordered = sorted(technique.fields(), key=lambda f: (
            technique.label_fields.index(f[0]) if f[0] in technique.label_fields
            else len(technique.label_fields)))
        for field, _, default in ordered:
            values = _values(choices.get((name, field), default))
            _check_axis(technique, field, values)
            axes.append((field, values))
        varying[name] = {f for f, vs in axes if len(vs) > 1}
        points = []
        for combo in itertools.product(*(vs for _, vs in axes)):
            values = dict(zip((f for f, _ in axes), combo))
            settings = technique.make(values)
            points.append((settings, {f"{name}.{f}": values[f] for f in varying[name]}))
        per_technique[name] = points

    count = 1 + sum(len(p) for p in per_technique.values())
    count += sum(len(_controls(registry.get(n), per_technique[n])) for n in enabled)
    if combine:
        count += _product_size(per_technique.values())
    if count > max_variants:
        swept = ", ".join(f"{registry.get(n).flag(f)} ({len(_values(choices[(n, f)]))} values)"
                          for n in enabled for f in sorted(varying[n]) if (n, f) in choices)
        raise ValueError(f"this sweep has {count} variants, above the cap of {max_variants}: "
                         f"give fewer values{' to ' + swept if swept else ''}"
                         f"{', drop --combine' if combine else ''}, or raise --max-variants")

    variants = [BASELINE]
    for name in enabled:
        technique = registry.get(name)
        for settings, axes in per_technique[name]:
            variants.append(VariantSpec(technique.label(settings, varying[name]), (name,),
                                        {name: settings}, axes=axes))
        for settings in _controls(technique, per_technique[name]):
            control = technique.control
            suffix = "-".join(technique.field(f).format(getattr(settings, f))
                              for f in control.uses if f in varying[name]
                              and getattr(settings, f) is not None)
            variants.append(VariantSpec(control.name + (f"-{suffix}" if suffix else ""),
                                        (control.name,), {name: settings}))
    if combine:
        for combo in itertools.product(*(per_technique[n] for n in enabled)):
            settings = {n: s for n, (s, _) in zip(enabled, combo)}
            axes = {k: v for _, a in combo for k, v in a.items()}
            label = "+".join(registry.get(n).label(s, varying[n]) for n, s in settings.items())
            variants.append(VariantSpec(label, tuple(enabled), settings, axes=axes))
    return tuple(variants)


def _controls(technique: registry.Technique, points: list) -> list:
    """One control per distinct value of the settings it depends on."""
    if technique.control is None:
        return []
    seen, out = set(), []
    for settings, _ in points:
        key = tuple(getattr(settings, f) for f in technique.control.uses)
        if key not in seen:
            seen.add(key)
            out.append(settings)
    return out


def _product_size(groups) -> int:
    size = 1
    for g in groups:
        size *= len(g)
    return size


def toggle_choices(toggles: Mapping[str, object]) -> tuple[dict, set[str]]:
    """Toggles named like the CLI's flags (``prune=0.5``, ``prune_method="l1"``,
    ``distill=True``, ``amp=True`` or ``"bf16"``, ``int8="static"``) as (choices, enabled).
    A technique's switch turns it on: its value (a ratio, a mode) or True; None and False
    leave it off."""
    by_flag = {}
    for t in registry.techniques():
        for field, _, _ in t.fields():
            by_flag[t.flag(field).lstrip("-").replace("-", "_")] = (t, field)
        if t.switch is None:
            by_flag[t.name] = (t, None)
    choices, enabled = {}, set()
    for key, value in toggles.items():
        if key not in by_flag:
            raise ValueError(f"unknown setting {key!r}; known: {', '.join(sorted(by_flag))}")
        technique, field = by_flag[key]
        is_switch = field is None or field == technique.switch
        if is_switch:
            if field is None:  # a bare switch such as distill
                if not isinstance(value, bool):
                    raise ValueError(f"{key} must be true or false, got {value!r}")
                if value:
                    enabled.add(technique.name)
                continue
            if value is None or value is False:
                continue
            enabled.add(technique.name)
            if value is True:
                if not technique.field(field).nullable:
                    raise ValueError(f"{key} must be {technique.field(field).accepted()}; "
                                     f"got True")
                continue  # on, with the field's default
        elif value is None and not technique.field(field).nullable:
            continue  # not given
        choices[(technique.name, field)] = value
    return choices, enabled


# -- the sweep -------------------------------------------------------------------------------

@dataclass(frozen=True)
class SweepSpec:
    """Model, data, device, budgets and the variants to build."""

    model: str = "seed_cnn"
    dataset: str = "digits"
    variants: tuple[VariantSpec, ...] = (BASELINE,)
    checkpoint: str | None = None
    input_shape: tuple[int, int, int] | None = None
    device: str = "auto"
    batch_size: int = 32
    epochs: int = 8
    seed: int = 0
    data_root: str | None = None
    download: bool = False
    # Measurement budget: at least this many timed runs and about this much time of samples.
    min_runs: int = 10
    min_time_s: float = 1.0
    warmup: int = 3
    threads: int | None = None  # None: all cores but one, so the OS and server do not contend
    lr: float = 1e-3
    # None: the split's statistics; with a checkpoint that is only a guess, said loudly.
    normalize: str | None = None
    seeds: int = 1              # every trained variant is rebuilt with this many seeds
    timing: str = "interleaved"
    timing_rounds: int = DEFAULT_TIMING_ROUNDS
    fp32: str = "ieee"          # on a GPU: IEEE fp32, or TF32 for matmuls and convolutions
    # A torchvision weights name (DEFAULT, IMAGENET1K_V1...) or "pretrained" (timm), loaded
    # from the local caches; None: the model starts from scratch (or --checkpoint).
    weights: str | None = None
    labels: str | None = None   # None: the class folders; "imagenet": folders are wnids

    def __post_init__(self):
        object.__setattr__(self, "variants", tuple(self.variants))
        for name in ("model", "dataset"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"sweep.{name} must be a non-empty string, got {value!r}")
        check_choice("sweep", "device", self.device, DEVICES)
        check_number("sweep", "batch_size", self.batch_size, 1, 65536, integer=True)
        # 0: the baseline is the model as loaded (weights or checkpoint), nothing is trained.
        check_number("sweep", "epochs", self.epochs, 0, 10_000, integer=True)
        check_number("sweep", "seed", self.seed, 0, 2**32 - 1, integer=True)
        check_number("sweep", "min_runs", self.min_runs, 1, 100_000, integer=True)
        check_number("sweep", "min_time_s", self.min_time_s, 0.0, 600.0)
        check_number("sweep", "warmup", self.warmup, 0, 10_000, integer=True)
        check_number("sweep", "lr", self.lr, 0.0, 10.0, low_open=True)
        if self.threads is not None:
            check_number("sweep", "threads", self.threads, 1, 1024, integer=True)
        if self.normalize is not None:
            parse_normalize(self.normalize)
        check_number("sweep", "seeds", self.seeds, 1, MAX_SEEDS, integer=True)
        check_choice("sweep", "timing", self.timing, TIMING_MODES)
        check_number("sweep", "timing_rounds", self.timing_rounds, 1, 100, integer=True)
        check_choice("sweep", "fp32", self.fp32, FP32_MODES)
        for name in ("checkpoint", "data_root"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()
                                      or "\x00" in value):
                raise ValueError(f"sweep.{name} must be a file path or None, got {value!r}")
        self._check_weights_and_labels()
        if not isinstance(self.download, bool):
            raise ValueError(f"sweep.download must be true or false, got {self.download!r}")
        if self.input_shape is not None:
            # A string or bytes would iterate into characters or byte values, a number not at
            # all: only a sequence of three integers is a shape.
            if not isinstance(self.input_shape, (tuple, list)):
                raise ValueError(f"sweep.input_shape must be three positive integers C,H,W, "
                                 f"got {self.input_shape!r}")
            shape = tuple(self.input_shape)
            if len(shape) != 3 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1
                                      or d > 4096 for d in shape):
                raise ValueError(
                    f"sweep.input_shape must be three positive integers C,H,W (each <= 4096), "
                    f"got {self.input_shape!r}")
            object.__setattr__(self, "input_shape", shape)
        if not self.variants:
            raise ValueError("sweep.variants must hold at least one variant")
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ValueError(f"sweep.variants: names must be unique, got {names}")
        if self.variants[0].techniques:
            raise ValueError("sweep.variants: the first variant must be the baseline (no techniques)")

    def _check_weights_and_labels(self) -> None:
        if self.weights is not None:
            if not isinstance(self.weights, str) or not self.weights.strip():
                raise ValueError(f"sweep.weights must be a weights name or None, got "
                                 f"{self.weights!r}")
            if self.model.split(":", 1)[0] not in WEIGHTS_SOURCES:
                sources = " and ".join(f"{s}:NAME" for s in WEIGHTS_SOURCES)
                raise ValueError(f"--weights applies to {sources} models; {self.model} takes "
                                 f"its weights from --checkpoint")
            if self.checkpoint is not None:
                raise ValueError("give --weights or --checkpoint, not both: each is the "
                                 "model's starting weights")
        if self.labels is not None:
            check_choice("sweep", "labels", self.labels, LABELS)
            if not self.dataset.startswith("imagefolder:"):
                raise ValueError(f"--labels {self.labels} reads an image folder's class "
                                 f"folders; the dataset is {self.dataset}")

    @classmethod
    def from_choices(cls, choices: Mapping[tuple[str, str], object], enabled, *,
                     combine: bool = False, max_variants: int = DEFAULT_MAX_VARIANTS,
                     **sweep) -> "SweepSpec":
        """A sweep from per-setting values (one, or several for an axis): see plan_variants."""
        if not isinstance(combine, bool):
            raise ValueError(f"combine must be true or false, got {combine!r}")
        return cls(variants=plan_variants(choices, enabled, combine=combine,
                                          max_variants=max_variants), **sweep)

    @classmethod
    def from_toggles(cls, *, combine: bool = False, max_variants: int = DEFAULT_MAX_VARIANTS,
                     **toggles) -> "SweepSpec":
        """The dashboard's and CLI's toggles as variants. Technique settings are named like
        their CLI flags (``prune=0.5, prune_method="channel", distill=True, temperature=4,
        amp=True, int8="static"``); the rest are SweepSpec fields."""
        sweep_fields = {f.name for f in fields(cls)}
        sweep = {k: v for k, v in toggles.items() if k in sweep_fields}
        choices, enabled = toggle_choices(
            {k: v for k, v in toggles.items() if k not in sweep_fields})
        return cls.from_choices(choices, enabled, combine=combine, max_variants=max_variants,
                                **sweep)

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "variants"}
        out["variants"] = [v.to_dict() for v in self.variants]
        if out["input_shape"] is not None:
            out["input_shape"] = list(out["input_shape"])
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "SweepSpec":
        data = dict(data)
        variants = tuple(VariantSpec.from_dict(v) for v in data.pop("variants"))
        if data.get("input_shape") is not None:
            data["input_shape"] = tuple(data["input_shape"])
        known = {f.name for f in fields(cls)}
        return cls(variants=variants, **{k: v for k, v in data.items() if k in known})
