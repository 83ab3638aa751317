"""The sweep runner: SweepSpec -> one VariantResult at a time.

``prepare_sweep`` checks everything a user can get wrong (model, data, checkpoint, input
shape) before anything runs and raises ``ValueError`` with one line. ``PreparedSweep.run``
then trains or loads the baseline and yields each variant as soon as it is measured. A variant
that raises becomes a result with ``error`` set and the sweep goes on; no variant mutates the
model it was given (the baseline is shared by every variant and may be cached by a server).
"""

from __future__ import annotations

import gc
import hashlib
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from optimizers.base import Context, Outcome
from optimizers.training import evaluate, fit

from . import measure
from .cache import WeightsCache
from .checkpoints import load_into, read_state_dict
from .datasets import DataBundle, check_in_memory_size, load_dataset
from .errors import described
from .environment import default_threads, environment_card, resolve_device
from .models import build_model, check_input_fits, default_student, is_user_model, \
    model_entry, user_model_digest
from .results import VariantResult
from .specs import CONTROL_TECHNIQUE, SweepSpec, VariantSpec

ACCURACY_BATCH = 256  # accuracy does not depend on the batch size; larger is faster
PHASES = ("build", "accuracy", "latency", "memory", "size")


@dataclass
class ProgressEvent:
    variant: str         # the variant's name, or "baseline-training"
    index: int           # 0-based position in the sweep (-1 for the baseline's training)
    total: int           # number of variants
    phase: str
    fraction: float = 0.0  # within the phase, 0..1

    def describe(self) -> str:
        where = f"{self.index + 1}/{self.total} " if self.index >= 0 else ""
        return f"{where}{self.variant}: {self.phase}"


ProgressFn = Callable[[ProgressEvent], None]


class Cancelled(Exception):
    """Raised between phases when ``should_stop()`` says so."""


def _file_digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _dataset_identity(spec: SweepSpec, data: DataBundle) -> list:
    if spec.dataset.startswith("imagefolder:"):
        root = Path(spec.dataset.split(":", 1)[1]).expanduser()
        files = sorted((str(p.relative_to(root)), p.stat().st_size, int(p.stat().st_mtime))
                       for p in root.rglob("*") if p.is_file())
        return ["imagefolder", hashlib.sha256(repr(files).encode()).hexdigest()[:16],
                list(data.input_shape)]
    if spec.dataset == "synthetic":
        return ["synthetic", list(data.input_shape), spec.seed]
    return [spec.dataset, list(data.input_shape)]


class PreparedSweep:
    """A validated sweep, ready to run: data loaded, baseline structure built and checked."""

    def __init__(self, spec: SweepSpec, *, cache: WeightsCache | None = None,
                 allowed_models_dir: str | Path | None = None):
        self.spec = spec
        self.device = resolve_device(spec.device)
        self.threads = spec.threads or default_threads()
        for v in spec.variants:
            # Students must exist before anything runs: a bad name is the user's mistake.
            if v.distill is not None:
                student = v.distill.student or default_student(spec.model)
                if student is None:
                    raise ValueError(f"model {spec.model} has no default student; "
                                     f"give --student NAME")
                model_entry(student)
        self.data = load_dataset(spec.dataset, spec.data_root, spec.download, spec.input_shape,
                                 spec.seed)
        self.allowed_models_dir = allowed_models_dir
        torch.manual_seed(spec.seed)
        # The timed batch is a copy of the inputs: a huge batch of large images is refused
        # here, as bad input, rather than by the allocator or the OOM killer.
        check_in_memory_size("the measured batch (--batch-size)", spec.batch_size,
                             self.data.input_shape)
        model = self._build(spec.model)
        self.example = self.data.example_batch(spec.batch_size)
        check_input_fits(model, self.example[:2], self.data.num_classes, spec.model)
        self.checkpoint_state = None
        if spec.checkpoint:
            self.checkpoint_state = read_state_dict(spec.checkpoint)
            load_into(model, self.checkpoint_state, Path(spec.checkpoint).name)
        self._untrained = model
        self.cache = cache if cache is not None else WeightsCache()
        self.model_key = ["user", Path(spec.model).name, user_model_digest(spec.model)] \
            if is_user_model(spec.model) else [spec.model]
        self.base_key = ("baseline", *self.model_key, *_dataset_identity(spec, self.data),
                         spec.epochs, spec.seed, spec.lr, spec.batch_size,
                         _file_digest(spec.checkpoint) if spec.checkpoint else None)
        self.environment = environment_card(self.device, self.threads)
        self.baseline: nn.Module | None = None
        self.cancelled = False

    def _build(self, name: str) -> nn.Module:
        d = self.data
        return build_model(name, d.num_classes, d.in_channels, d.input_size,
                           self.allowed_models_dir)

    # -- the baseline --------------------------------------------------------------------

    def train_batches(self, seed: int):
        """A fresh epoch iterator factory: each call shuffles with the next seed."""
        counter = itertools.count()

        def batches():
            return self.data.batches("train", self.spec.batch_size, shuffle=True,
                                     seed=seed * 1000 + next(counter))
        return batches

    def load_baseline(self, on_progress: ProgressFn | None = None,
                      should_stop: Callable[[], bool] | None = None) -> nn.Module:
        if self.baseline is not None:
            return self.baseline
        spec = self.spec
        if spec.checkpoint or not self.data.labelled:
            # A checkpoint is the baseline; synthetic data is speed-only (random weights).
            model = self._untrained
        else:
            def report(fraction: float):
                if on_progress:
                    on_progress(ProgressEvent("baseline", -1, len(spec.variants),
                                              "training", fraction))

            def train(m: nn.Module):
                torch.manual_seed(spec.seed)
                fit(m, self.train_batches(spec.seed), spec.epochs, device=self.device,
                    lr=spec.lr, seed=spec.seed, on_progress=report, should_stop=should_stop)
                if should_stop is not None and should_stop():
                    raise Cancelled()

            def build():
                torch.manual_seed(spec.seed)
                return self._build(spec.model)
            model = self.cache(self.base_key, build, train)
        self.baseline = model.to(self.device).eval()
        self._untrained = None
        return self.baseline

    # -- variants ------------------------------------------------------------------------

    def context(self, on_phase: Callable[[str, float], None]) -> Context:
        d = self.data
        return Context(
            train_batches=self.train_batches(self.spec.seed + 1),
            example_input=self.example,
            num_classes=d.num_classes, in_channels=d.in_channels, device=self.device,
            epochs=self.spec.epochs, lr=self.spec.lr, seed=self.spec.seed,
            teacher=self.baseline,
            build_model=lambda name: self._build(name),
            default_student=default_student(self.spec.model),
            cached=self.cache, on_progress=on_phase, base_key=self.base_key)

    def build_variant(self, variant: VariantSpec, ctx: Context) -> Outcome:
        if not variant.techniques:
            return Outcome(model=self.baseline)
        from optimizers import chain
        if variant.techniques == (CONTROL_TECHNIQUE,):
            return chain.scratch(variant.distill, ctx)
        steps = [(t, getattr(variant, t)) for t in variant.techniques]
        return chain.apply_chain(self.baseline, steps, ctx)

    def run(self, on_progress: ProgressFn | None = None,
            should_stop: Callable[[], bool] | None = None) -> Iterator[VariantResult]:
        stop = should_stop or (lambda: False)
        # Training too runs on the pinned threads: on two cores, two threads contending with
        # the OS trained 5x slower than one.
        with measure.pinned_threads(self.threads):
            try:
                self.load_baseline(on_progress, stop)
            except Cancelled:
                self.cancelled = True
                return
            for index, variant in enumerate(self.spec.variants):
                if stop():
                    self.cancelled = True
                    return
                try:
                    result = self._measure_variant(index, variant, on_progress, stop)
                except Cancelled:
                    self.cancelled = True
                    return
                yield result

    def _measure_variant(self, index: int, variant: VariantSpec,
                         on_progress: ProgressFn | None, stop: Callable[[], bool]
                         ) -> VariantResult:
        spec = self.spec
        total = len(spec.variants)
        result = VariantResult(name=variant.name, techniques=list(variant.techniques),
                               config=variant.settings(), device=str(self.device),
                               batch_size=spec.batch_size,
                               started_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
        phase = "build"
        t_variant = time.perf_counter()

        def report(name: str, fraction: float = 0.0):
            if on_progress:
                on_progress(ProgressEvent(variant.name, index, total, name, fraction))

        def enter(name: str):
            nonlocal phase
            if stop():
                raise Cancelled()
            phase = name
            report(name)

        try:
            enter("build")
            t0 = time.perf_counter()
            outcome = self.build_variant(variant, self.context(
                lambda p, f: report(f"build: {p}", f)))
            result.phase_s["build"] = time.perf_counter() - t0
            result.config = {**result.config, **outcome.config}
            device = outcome.device or self.device
            result.device = str(device)
            model = outcome.model
            if next(iter(model.parameters()), None) is not None and \
                    next(model.parameters()).device != device:
                model = model.to(device)
            model.eval()
            autocast = lambda: outcome.autocast(device.type)  # noqa: E731 (fresh per use)
            result.layer_sparsity = outcome.layer_sparsity

            enter("accuracy")
            t0 = time.perf_counter()
            if self.data.labelled:
                result.accuracy = evaluate(model, self.data.batches("test", ACCURACY_BATCH),
                                           device, outcome.autocast_dtype)
            result.phase_s["accuracy"] = time.perf_counter() - t0

            enter("latency")
            tracker = measure.measure_latency(
                model, self.example, device, autocast=autocast(), min_runs=spec.min_runs,
                min_time_s=spec.min_time_s, warmup=spec.warmup)
            result.latency_samples_ms = tracker.samples_ms
            result.phase_s["latency"] = tracker.wall_s

            enter("memory")
            t0 = time.perf_counter()
            result.peak_memory_bytes, result.memory_method = measure.measure_peak_memory(
                model, self.example, device, autocast=autocast())
            result.phase_s["memory"] = time.perf_counter() - t0

            enter("size")
            t0 = time.perf_counter()
            result.size_bytes, result.size_gzip_bytes = measure.serialized_size(model)
            result.params, result.nonzero_params = measure.count_params(model)
            result.flops = outcome.flops_hint or measure.count_flops(
                model, self.example[:1], device)
            result.phase_s["size"] = time.perf_counter() - t0
        except Cancelled:
            raise
        except torch.OutOfMemoryError as exc:
            result.error = f"out of memory on {result.device} during {phase}: {described(exc)}"
        except Exception as exc:  # one variant's failure never sinks the sweep
            result.error = f"{phase} failed: {described(exc)}"
        finally:
            if result.error is not None:
                _release_memory()
        result.wall_s = time.perf_counter() - t_variant
        report("done", 1.0)
        return result


def _release_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def prepare_sweep(spec: SweepSpec, *, cache: WeightsCache | None = None,
                  allowed_models_dir: str | Path | None = None) -> PreparedSweep:
    return PreparedSweep(spec, cache=cache, allowed_models_dir=allowed_models_dir)


def run_sweep(spec: SweepSpec, on_progress: ProgressFn | None = None,
              should_stop: Callable[[], bool] | None = None, *,
              cache: WeightsCache | None = None) -> Iterator[VariantResult]:
    """Validate (ValueError before the first result), then yield each variant's result."""
    sweep = prepare_sweep(spec, cache=cache)
    return sweep.run(on_progress, should_stop)
