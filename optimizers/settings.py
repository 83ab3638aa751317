"""Settings of each technique: self-validating dataclasses, usable without the engine.

Allowed values sit in UPPER_CASE constants beside the dataclasses; ``__post_init__`` rejects a
bad value with a message that names the field, the accepted values and what was given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PRUNE_METHODS = ("l1", "global", "channel")
PRUNE_RATIO_RANGE = (0.0, 0.95)
AMP_DTYPES = ("fp16", "bf16")
INT8_MODES = ("dynamic", "static", "qat")


def _check_number(owner: str, name: str, value, low=None, high=None, *, integer=False,
                  low_open=False):
    """One shared range check so every message reads the same way."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            integer and not isinstance(value, int)) or (
            isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(f"{owner}.{name} must be {kind}, got {value!r}")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and value > high
    if too_low or too_high:
        lo = "" if low is None else (f"> {low}" if low_open else f">= {low}")
        hi = "" if high is None else f"<= {high}"
        rng = " and ".join(p for p in (lo, hi) if p)
        raise ValueError(f"{owner}.{name} must be {rng}, got {value!r}")


def _check_choice(owner: str, name: str, value, choices):
    if value not in choices:
        raise ValueError(
            f"{owner}.{name} must be one of {', '.join(map(str, choices))}; got {value!r}")


@dataclass(frozen=True)
class PruneSettings:
    ratio: float = 0.5
    method: str = "l1"
    # A short fine-tune recovers most of the accuracy pruning costs; its budget is recorded.
    finetune_epochs: int = 2

    def __post_init__(self):
        _check_number("prune", "ratio", self.ratio, *PRUNE_RATIO_RANGE)
        _check_choice("prune", "method", self.method, PRUNE_METHODS)
        _check_number("prune", "finetune_epochs", self.finetune_epochs, 0, 1000, integer=True)

    @property
    def label(self) -> str:
        return f"prune-{self.method}-{self.ratio:g}"


@dataclass(frozen=True)
class DistillSettings:
    temperature: float = 4.0
    alpha: float = 0.7
    student: str | None = None  # None: the registry's narrower model of the teacher's family
    epochs: int | None = None   # None: the sweep's training budget

    def __post_init__(self):
        _check_number("distill", "temperature", self.temperature, 0.0, 100.0, low_open=True)
        _check_number("distill", "alpha", self.alpha, 0.0, 1.0)
        if self.student is not None and (not isinstance(self.student, str) or not self.student):
            raise ValueError(f"distill.student must be a model name, got {self.student!r}")
        if self.epochs is not None:
            _check_number("distill", "epochs", self.epochs, 1, 1000, integer=True)

    @property
    def label(self) -> str:
        return f"distill-T{self.temperature:g}"


@dataclass(frozen=True)
class AmpSettings:
    dtype: str | None = None  # None: fp16 on CUDA, bf16 on the CPU (fp16 CPU kernels are scarce)

    def __post_init__(self):
        if self.dtype is not None:
            _check_choice("amp", "dtype", self.dtype, AMP_DTYPES)

    def resolved(self, device_type: str) -> str:
        return self.dtype or ("fp16" if device_type == "cuda" else "bf16")

    @property
    def label(self) -> str:
        return f"amp-{self.dtype}" if self.dtype else "amp"


@dataclass(frozen=True)
class Int8Settings:
    mode: str = "static"
    calibration_batches: int = 8  # of the sweep's batch size, drawn from the training split
    qat_epochs: int = 1

    def __post_init__(self):
        _check_choice("int8", "mode", self.mode, INT8_MODES)
        _check_number("int8", "calibration_batches", self.calibration_batches, 1, 10_000,
                      integer=True)
        _check_number("int8", "qat_epochs", self.qat_epochs, 1, 1000, integer=True)

    @property
    def label(self) -> str:
        return f"int8-{self.mode}"
