"""What a sweep is asked to build: self-validating, hashable configs.

Every allowed value sits in an UPPER_CASE constant beside the dataclass that uses it, and
``__post_init__`` rejects a bad value with a message naming the field, the accepted values
and what was given. The engine raises ``ValueError`` for bad input; the CLI turns it into
one line and exit status 2, the dashboard into ``st.error``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields, replace

from optimizers.settings import (  # noqa: F401  (re-exported: the engine's vocabulary)
    AMP_DTYPES, INT8_MODES, PRUNE_METHODS, PRUNE_RATIO_RANGE, AmpSettings, DistillSettings,
    Int8Settings, PruneSettings, _check_choice, _check_number)

DEVICES = ("auto", "cpu", "cuda")
# Data sets the loader knows (benchmarks.datasets); here so menus list them without numpy.
DATASETS = ("digits", "cifar10", "imagefolder:DIR", "synthetic")
# Order matters: a combined variant applies them in this order (AMP acts at run time).
TECHNIQUES = ("prune", "distill", "int8", "amp")
CONTROL_TECHNIQUE = "student-scratch"
# Gradient compressions of the distributed benchmark (DDP communication hooks).
COMPRESSIONS = ("none", "fp16", "bf16")


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class VariantSpec:
    """One variant: the techniques applied, in order, and their settings."""

    name: str
    techniques: tuple[str, ...] = ()
    prune: PruneSettings | None = None
    distill: DistillSettings | None = None
    amp: AmpSettings | None = None
    int8: Int8Settings | None = None

    def __post_init__(self):
        object.__setattr__(self, "techniques", tuple(self.techniques))
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"variant.name must be a non-empty string, got {self.name!r}")
        allowed = TECHNIQUES + (CONTROL_TECHNIQUE,)
        for t in self.techniques:
            _check_choice("variant", "techniques", t, allowed)
        if len(set(self.techniques)) != len(self.techniques):
            raise ValueError(f"variant.techniques must not repeat, got {list(self.techniques)}")
        if CONTROL_TECHNIQUE in self.techniques and len(self.techniques) != 1:
            raise ValueError("variant.techniques: student-scratch is a control and stands alone")
        needs = {"prune": self.prune, "distill": self.distill, "amp": self.amp,
                 "int8": self.int8, CONTROL_TECHNIQUE: self.distill}
        for t in self.techniques:
            if needs[t] is None:
                raise ValueError(f"variant {self.name!r} applies {t} but has no {t} settings")
        order = [t for t in TECHNIQUES if t in self.techniques]
        if CONTROL_TECHNIQUE not in self.techniques and list(self.techniques) != order:
            raise ValueError(
                f"variant.techniques must follow the order {' -> '.join(TECHNIQUES)}; "
                f"got {list(self.techniques)}")

    def settings(self) -> dict:
        """The settings of the techniques this variant applies, as plain data."""
        out = {}
        for t in self.techniques:
            key = "distill" if t == CONTROL_TECHNIQUE else t
            out[key] = asdict(getattr(self, key))
        return out

    def stable_hash(self) -> str:
        """Same settings, same hash, across processes and runs (the cache key)."""
        payload = {"techniques": list(self.techniques), **self.settings()}
        return hashlib.sha256(_canonical(payload).encode()).hexdigest()[:16]


BASELINE = VariantSpec(name="baseline")


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
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        object.__setattr__(self, "variants", tuple(self.variants))
        for name in ("model", "dataset"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"sweep.{name} must be a non-empty string, got {value!r}")
        _check_choice("sweep", "device", self.device, DEVICES)
        _check_number("sweep", "batch_size", self.batch_size, 1, 65536, integer=True)
        _check_number("sweep", "epochs", self.epochs, 1, 10_000, integer=True)
        _check_number("sweep", "seed", self.seed, 0, 2**32 - 1, integer=True)
        _check_number("sweep", "min_runs", self.min_runs, 1, 100_000, integer=True)
        _check_number("sweep", "min_time_s", self.min_time_s, 0.0, 600.0)
        _check_number("sweep", "warmup", self.warmup, 0, 10_000, integer=True)
        _check_number("sweep", "lr", self.lr, 0.0, 10.0, low_open=True)
        if self.threads is not None:
            _check_number("sweep", "threads", self.threads, 1, 1024, integer=True)
        for name in ("checkpoint", "data_root"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()
                                      or "\x00" in value):
                raise ValueError(f"sweep.{name} must be a file path or None, got {value!r}")
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

    @classmethod
    def from_toggles(cls, *, prune: float | None = None, prune_method: str = "l1",
                     finetune_epochs: int = 2, distill: bool = False, temperature: float = 4.0,
                     alpha: float = 0.7, student: str | None = None, amp: bool | str = False,
                     int8: str | None = None, combine: bool = False,
                     calibration_batches: int = 8, **sweep) -> "SweepSpec":
        """The dashboard's and CLI's toggles as variants: the baseline, one variant per enabled
        technique (distillation brings its scratch-trained control), and, with ``combine``, one
        variant chaining every enabled technique: prune -> distill -> INT8, AMP at run time."""
        # Switches are booleans, not truthy values: the string "no" must not turn one on.
        for name, value in (("distill", distill), ("combine", combine)):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false, got {value!r}")
        if not (amp is None or isinstance(amp, (bool, str))):
            raise ValueError(f"amp must be true, false or one of {', '.join(AMP_DTYPES)}; "
                             f"got {amp!r}")
        if not (int8 is None or int8 is False or isinstance(int8, str)):
            raise ValueError(f"int8 must be off (None) or one of {', '.join(INT8_MODES)}; "
                             f"got {int8!r}")
        p = PruneSettings(prune, prune_method, finetune_epochs) if prune is not None else None
        d = DistillSettings(temperature, alpha, student) if distill else None
        a = AmpSettings(None if amp is True else amp) if amp is not None and amp is not False \
            else None
        q = Int8Settings(int8, calibration_batches) if int8 is not None and int8 is not False \
            else None
        variants = [BASELINE]
        if p:
            variants.append(VariantSpec(p.label, ("prune",), prune=p))
        if d:
            variants.append(VariantSpec(d.label, ("distill",), distill=d))
            variants.append(VariantSpec(CONTROL_TECHNIQUE, (CONTROL_TECHNIQUE,), distill=d))
        if q:
            variants.append(VariantSpec(q.label, ("int8",), int8=q))
        if a:
            variants.append(VariantSpec(a.label, ("amp",), amp=a))
        enabled = [x for x in (p, d, q, a) if x]
        if combine:
            if len(enabled) < 2:
                raise ValueError("combine needs at least two enabled techniques "
                                 "(--prune, --distill, --amp, --int8)")
            techniques = tuple(t for t, x in zip(TECHNIQUES, (p, d, q, a)) if x)
            variants.append(VariantSpec("+".join(x.label for x in enabled), techniques,
                                        prune=p, distill=d, amp=a, int8=q))
        return cls(variants=tuple(variants), **sweep)

    def with_(self, **changes) -> "SweepSpec":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "variants"}
        out["variants"] = [
            {"name": v.name, "techniques": list(v.techniques), "settings": v.settings()}
            for v in self.variants]
        if out["input_shape"] is not None:
            out["input_shape"] = list(out["input_shape"])
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "SweepSpec":
        data = dict(data)
        variants = []
        for v in data.pop("variants"):
            settings = v.get("settings", {})
            techniques = tuple(v["techniques"])
            kwargs = {}
            if "prune" in settings:
                kwargs["prune"] = PruneSettings(**settings["prune"])
            if "distill" in settings:
                kwargs["distill"] = DistillSettings(**settings["distill"])
            if "amp" in settings:
                kwargs["amp"] = AmpSettings(**settings["amp"])
            if "int8" in settings:
                kwargs["int8"] = Int8Settings(**settings["int8"])
            variants.append(VariantSpec(v["name"], techniques, **kwargs))
        if data.get("input_shape") is not None:
            data["input_shape"] = tuple(data["input_shape"])
        known = {f.name for f in fields(cls)}
        return cls(variants=tuple(variants), **{k: v for k, v in data.items() if k in known})
