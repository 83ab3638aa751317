"""What a sweep is asked to build: model, data, device, budgets and its variants.

The techniques' vocabulary (names, settings, their bounds, flags and chain order) comes from
the technique registry (``optimizers.registry``); nothing here names a technique. Every
other allowed value sits in an UPPER_CASE constant beside the dataclass that uses it, and
``__post_init__`` rejects a bad value with a message naming the field, the accepted values and
what was given. The engine raises ``ValueError`` for bad input; the CLI turns it into one line
and exit status 2, the dashboard into ``st.error``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

from benchmarks.spec.datasets import check_dataset
from benchmarks.spec.isa import get as profile
from benchmarks.spec.plan import DEFAULT_MAX_VARIANTS, plan_variants, toggle_choices
from benchmarks.spec.runtimes import check_axes
from benchmarks.spec.variant import BASELINE, VariantSpec
from optimizers.settings import check_choice, check_number

DEVICES = ("auto", "cpu", "cuda")
# Gradient compressions of the distributed benchmark (DDP communication hooks).
COMPRESSIONS = ("none", "fp16", "bf16")
MAX_SEEDS = 10
# The bounds that bind (a page's widgets take them from here, so none is narrower or wider).
MAX_EPOCHS = 10_000
MAX_BATCH = 65536
# How inputs are scaled before the model sees them: the training split's per-channel
# statistics, nothing (pixels in [0, 1]), ImageNet's, or explicit MEAN,STD (one number for
# every channel, or per channel joined by ':', e.g. 0.485:0.456:0.406,0.229:0.224:0.225).
NORMALIZE_MODES = ("dataset", "none", "imagenet")
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
# Label sets of an image folder besides its own class folders (benchmarks.zoo.inputs).
LABELS = ("imagenet",)
# How an image folder's pictures meet the input shape: the shorter side resized to cover it
# and the centre cropped (as pretrained weights' pipelines do; the aspect ratio kept), or
# resized straight to it (the aspect ratio lost: what runs before this option did).
RESIZE_MODES = ("crop", "squash")
# Model sources that take --weights: their pretrained files (benchmarks.zoo.hub).
WEIGHTS_SOURCES = ("torchvision", "timm")
# Timing: every variant is built first, then timed in this many round-robin rounds.
TIMING_MODES = ("interleaved", "sequential")
FP32_MODES = ("ieee", "tf32")  # benchmarks.measure.environment.apply_precision sets them
# Ten: the runtime grid names a best runtime only where a paired bootstrap over these rounds
# puts it ahead beyond noise (report.runtimes.verdict), and a percentile bootstrap over five
# rounds covers about 88% where it says 95% (t's 2.78 against z's 1.96 at four degrees of
# freedom), over ten about 92%; with ten, a quiet host separates cells 10% apart. The budget
# per row (min_time_s) is split over the rounds, so a sweep takes about as long.
DEFAULT_TIMING_ROUNDS = 10
# Above this many rows (variants x runtimes x batch sizes x thread counts) a sweep is refused.
MAX_CELLS = 256
# Where a sweep's builds (and the distributed benchmark's ranks) run (benchmarks.executors).
EXECUTORS = ("local", "ray")


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
    resize: str = "crop"        # an image folder's pictures: crop or squash (RESIZE_MODES)
    # Deployment axes (benchmarks.spec.runtimes): every variant is also timed under these
    # runtimes, at these batch sizes and thread counts, one row each (empty: the batch size
    # above, the threads above). Eager PyTorch always runs: the other rows' reference.
    runtimes: tuple[str, ...] = ("eager",)
    eval_batch_sizes: tuple[int, ...] = ()
    thread_counts: tuple[int, ...] = ()
    # Instruction-set profiles (benchmarks.spec.isa) the sweep is timed under besides the
    # machine as it is, each in a process of its own (empty: native alone).
    isa: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "variants", tuple(self.variants))
        for name in ("model", "dataset"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"sweep.{name} must be a non-empty string, got {value!r}")
        check_choice("sweep", "device", self.device, DEVICES)
        check_number("sweep", "batch_size", self.batch_size, 1, MAX_BATCH, integer=True)
        # 0: the baseline is the model as loaded (weights or checkpoint), nothing is trained.
        check_number("sweep", "epochs", self.epochs, 0, MAX_EPOCHS, integer=True)
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
        check_choice("sweep", "resize", self.resize, RESIZE_MODES)
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
        check_dataset(self.dataset, self.input_shape)  # a registered name (spec.datasets)
        if not self.variants:
            raise ValueError("sweep.variants must hold at least one variant")
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ValueError(f"sweep.variants: names must be unique, got {names}")
        if self.variants[0].techniques:
            raise ValueError("sweep.variants: the first variant must be the baseline (no techniques)")
        self._check_deployment()

    def _check_deployment(self) -> None:
        isa = tuple(self.isa or ())
        for name in isa:
            profile(name)
        if len(set(isa)) != len(isa):
            raise ValueError(f"--isa lists a profile twice: {', '.join(isa)}")
        object.__setattr__(self, "isa", isa)
        runtimes, batches, counts = check_axes(self.runtimes, self.eval_batch_sizes,
                                               self.thread_counts)
        object.__setattr__(self, "runtimes", runtimes)
        object.__setattr__(self, "eval_batch_sizes", batches)
        object.__setattr__(self, "thread_counts", counts)
        if counts and self.threads is None:
            object.__setattr__(self, "threads", max(counts))
        if counts and self.threads is not None and self.threads < max(counts):
            raise ValueError(f"sweep.threads ({self.threads}) is below the largest of "
                             f"thread_counts {counts}")
        cells = len(self.variants) * len(runtimes) * max(1, len(batches)) * max(1, len(counts))
        if cells > MAX_CELLS:
            raise ValueError(f"this sweep measures {cells} rows (variants x runtimes x batch "
                             f"sizes x thread counts), above the cap of {MAX_CELLS}: give "
                             f"fewer values")

    @property
    def has_cells(self) -> bool:
        """Whether any variant is timed beyond eager at one batch size and thread count."""
        return len(self.runtimes) > 1 or len(self.eval_batch_sizes) > 1 or \
            len(self.thread_counts) > 1

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
        for name in ("runtimes", "eval_batch_sizes", "thread_counts"):
            out[name] = list(out[name])
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "SweepSpec":
        data = dict(data)
        variants = tuple(VariantSpec.from_dict(v) for v in data.pop("variants"))
        if data.get("input_shape") is not None:
            data["input_shape"] = tuple(data["input_shape"])
        if "resize" not in data and str(data.get("dataset", "")).startswith("imagefolder:"):
            data["resize"] = "squash"  # stored before the option: its images were squashed
        known = {f.name for f in fields(cls)}
        return cls(variants=variants, **{k: v for k, v in data.items() if k in known})
