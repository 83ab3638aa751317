"""The sweep runner: SweepSpec -> one VariantResult per variant.

``prepare_sweep`` checks everything a user can get wrong (model, data, checkpoint, input
shape) before anything runs and raises ``ValueError`` with one line. ``PreparedSweep.run``
then trains or loads the baseline and works in three passes:

1. build every variant and measure what does not depend on the clock (accuracy with its
   per-example correctness, peak memory, size, FLOPs); each is handed to ``on_partial`` as
   soon as it is measured, so the store and the UI see partial sweeps;
2. with ``seeds`` > 1, rebuild every variant from a baseline trained with each further seed
   and score it (accuracy only: timings are not repeated per seed);
3. time every variant together, in interleaved round-robin rounds, so drift of a noisy host
   hits every variant alike; variants that do not fit in memory together are timed one by
   one right after their build instead, and say so.

A variant that raises becomes a result with ``error`` set and the sweep goes on; no variant
mutates the model it was given (the baseline is shared by every variant and may be cached by
a server). Every training step draws its data order and initial weights from its own key, so
a result never depends on the cache's state or on what ran before it.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import hashlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from benchmarks.measure import machine
from benchmarks.measure.environment import (
    apply_precision,
    default_threads,
    environment_card,
    precision_key,
    resolve_device,
)
from benchmarks.measure.latency import measure_latency, pinned_threads
from benchmarks.measure.memory import measure_peak_memory, measure_traffic, state_bytes
from benchmarks.measure.size import serialized_size
from benchmarks.report.results import VariantResult
from benchmarks.report.stats import pack_bits
from benchmarks.run.cache import WeightsCache
from benchmarks.spec.cancel import Cancelled
from benchmarks.spec.folders import inside
from benchmarks.spec.sweep import SweepSpec, parse_normalize
from benchmarks.spec.variant import VariantSpec
from benchmarks.zoo.checkpoints import load_into, read_state_dict
from benchmarks.zoo.datasets import DataBundle, load_dataset, stored_size
from benchmarks.zoo.models import (
    build_model,
    check_input_fits,
    check_model,
    default_student,
    model_source,
)
from optimizers.base import Context, Outcome
from optimizers.counting import count_flops, count_params
from optimizers.errors import described
from optimizers.training import correctness, fit

ACCURACY_BATCH = 256  # accuracy does not depend on the batch size; larger is faster
PHASES = ("build", "accuracy", "memory", "size", "seeds", "latency")
# A baseline loaded from a checkpoint within this many points of chance is suspect; so is one
# that another normalisation would score this many points better (and significantly).
NEAR_CHANCE_POINTS = 5.0
BETTER_NORMALIZE_POINTS = 10.0
# Variants are kept resident for interleaved timing while their weights and one forward's
# peak fit in this share of the memory available when the sweep starts.
RESIDENT_SHARE = 0.25


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
PartialFn = Callable[[int, VariantResult], None]


@dataclass
class Built:
    """A variant built and measured but for its latency."""
    index: int
    result: VariantResult
    model: nn.Module | None = None
    device: torch.device | None = None
    autocast_dtype: torch.dtype | None = None
    example: torch.Tensor | None = None  # the timed batch, in the variant's memory format
    samples: list[float] = field(default_factory=list)
    host: list[float] = field(default_factory=list)
    visits: int = 0

    def autocast(self):
        from optimizers.precision import autocast
        return autocast(self.device.type, self.autocast_dtype)


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


def available_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    return machine.available_memory_bytes()


class PreparedSweep:
    """A validated sweep, ready to run: data loaded, baseline structure built and checked."""

    def __init__(self, spec: SweepSpec, *, cache: WeightsCache | None = None,
                 allowed_models_dir: str | Path | None = None,
                 allowed_data_dir: str | Path | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 memory_share: float | None = None, executor=None):
        self.spec = spec
        # Where trainable builds run (None: here, in turn); see benchmarks/executors.
        self.executor = executor
        self.failed_builds: dict[int, str] = {}    # variant index -> why its build failed
        self.built_on: dict[int, list[str]] = {}   # variant index -> where it was trained
        self.device = resolve_device(spec.device)
        self.threads = spec.threads or default_threads()
        self.source = model_source(spec.model)
        self.source.check(spec.model)
        self._check_students()
        self.warnings: list[str] = []
        # Pretrained weights: the file must be in the local cache (one line naming it and its
        # folder otherwise, before any data loads); their transforms say how inputs look.
        self.pipeline = None
        if spec.weights is not None:
            self.source.weights_file(spec.model, spec.weights, spec.download)
            self.pipeline = self.source.pipeline(spec.model, spec.weights)
        self.normalize = self._normalize()
        self.keep_head = spec.labels == "imagenet"
        input_shape = spec.input_shape
        if input_shape is None and self.pipeline is not None and spec.dataset == "synthetic":
            input_shape = self.pipeline.shape
        self.allowed_models_dir = allowed_models_dir
        if allowed_data_dir is not None:
            _check_data_paths(spec, Path(allowed_data_dir))
        self._admit(memory_share, input_shape)
        self.data = load_dataset(spec.dataset, spec.data_root, spec.download, input_shape,
                                 spec.seed, normalize=self.normalize, labels=spec.labels,
                                 pipeline=self.pipeline, should_stop=should_stop)
        torch.manual_seed(spec.seed)
        model = self._build(spec.model, weights=spec.weights, keep_head=self.keep_head,
                            download=spec.download)
        self.example = self.data.example_batch(spec.batch_size)
        check_input_fits(model, self.example[:2], self.data.num_classes, spec.model)
        self.checkpoint_state = None
        if spec.checkpoint:
            self.checkpoint_state = read_state_dict(spec.checkpoint)
            load_into(model, self.checkpoint_state, Path(spec.checkpoint).name)
        self._untrained = model
        self.cache = cache if cache is not None else WeightsCache()
        if executor is not None:
            from benchmarks.run.weights import MemoryCache
            # Weights trained elsewhere land here, over the sweep's own cache.
            self.cache = MemoryCache(fallback=self.cache)
        self.model_key = self.source.identity(spec.model, spec.weights, spec.download)
        self.model_card = self._model_card()
        self.environment = environment_card(self.device, self.threads)
        self.environment["precision"] = apply_precision(self.device, spec.fp32)
        self.environment["model"] = self.model_card
        self.environment["memory"] = {"estimated_peak_bytes": self.footprint.total,
                                      "estimate": dataclasses.asdict(self.footprint),
                                      "limit_bytes": machine.memory_limit()}
        self.environment["data"] = {"dataset": spec.dataset,
                                    "input_shape": list(self.data.input_shape),
                                    "normalization": self.data.normalization,
                                    "test_examples": len(self.data.test)}
        if self._resizes_images():
            self.environment["data"]["pipeline"] = self.pipeline.at(
                self.data.input_size).to_dict()
        self.baseline: nn.Module | None = None
        self.baseline_build: dict = {}  # time and cache use of the primary baseline's training
        self.cancelled = False

    def _admit(self, memory_share: float | None, input_shape) -> None:
        """Refuse, before the data set is loaded or a weight allocated, a sweep whose
        estimated peak memory is more than it may use (footprint.py)."""
        from benchmarks.run.footprint import admit, describe_data, sweep_footprint
        from benchmarks.spec.limits import Limits
        spec = self.spec
        size = stored_size(spec.dataset, spec.data_root, input_shape, spec.labels,
                           self.pipeline)
        share = memory_share if memory_share is not None else Limits.from_env().memory_share

        def build() -> nn.Module:
            # Random weights: the estimate needs the structure, not the trained values.
            return build_model(spec.model, size.classes, size.shape[0], size.shape[1:],
                               self.allowed_models_dir, keep_head=self.keep_head)
        self.footprint = sweep_footprint(spec, size, build)
        gpu_free = available_memory_bytes(self.device) if self.device.type == "cuda" else None
        admit(describe_data(spec.dataset, size, spec.batch_size), self.footprint, share,
              gpu_free)

    def _check_students(self) -> None:
        """Students must exist before anything runs: a bad name is the user's mistake."""
        spec = self.spec
        for v in spec.variants:
            distill = dict(v.settings).get("distill")
            if distill is None:
                continue
            student = distill.student or default_student(spec.model)
            if student is None:
                raise ValueError(f"model {spec.model} has no obvious smaller sibling to "
                                 f"distil into; give --student (a zoo name, torchvision:NAME, "
                                 f"timm:NAME or FILE.py:FACTORY)")
            check_model(student)
            if spec.epochs == 0 and distill.epochs is None:
                raise ValueError("distillation trains its student for --epochs, which is 0 "
                                 "here; give --distill-epochs N")

    def _normalize(self) -> str:
        """--normalize as given; else the weights' own mean and std; else the data set's."""
        spec = self.spec
        if spec.normalize is not None:
            parse_normalize(spec.normalize)
            if self.pipeline is not None and spec.normalize != self.pipeline.normalize():
                self.warnings.append(
                    f"--normalize {spec.normalize} overrides how the weights were trained "
                    f"(mean {list(self.pipeline.mean)}, std {list(self.pipeline.std)})")
            return spec.normalize
        if self.pipeline is not None:
            return self.pipeline.normalize()
        if spec.checkpoint:
            self.warnings.append(
                "no --normalize given with --checkpoint: inputs are standardised with the "
                "data set's own statistics, which may not be how the checkpoint was trained; "
                "say how with --normalize dataset|none|imagenet|MEAN,STD")
        return "dataset"

    def _resizes_images(self) -> bool:
        """The weights' resize and crop shape an image folder's pixels (other data sets keep
        their own; the mean and std apply to every one)."""
        return self.pipeline is not None and self.spec.dataset.startswith("imagefolder:")

    def _model_card(self) -> dict:
        """What the baseline starts from, for the run's record and the baseline's config."""
        spec, data = self.spec, self.data
        card = {"source": self.source.name, "name": spec.model,
                "family": self.source.family(spec.model),
                **self.source.card(spec.model, spec.weights, data.num_classes,
                                   self.keep_head)}
        starts = "the weights" if spec.weights else "the checkpoint" if spec.checkpoint \
            else "random initialisation"
        if spec.epochs == 0 and data.labelled:
            card["baseline"] = f"evaluated as loaded from {starts}, no training (--epochs 0)"
            if spec.weights and not self.keep_head:
                self.warnings.append(
                    "--epochs 0 with a replaced classifier: the new head is untrained and "
                    "scores near chance; name ImageNet-id folders with --labels imagenet, or "
                    "train it with --epochs N")
            elif not spec.weights and not spec.checkpoint:
                self.warnings.append("--epochs 0 without --weights or --checkpoint: the "
                                     "baseline is the randomly initialised model")
        elif data.labelled and not spec.checkpoint:
            card["baseline"] = f"trained {spec.epochs} epochs from {starts}"
        return card

    def _build(self, name: str, **kwargs) -> nn.Module:
        d = self.data
        return build_model(name, d.num_classes, d.in_channels, d.input_size,
                           self.allowed_models_dir, **kwargs)

    def _as_loaded(self) -> bool:
        """The baseline is the model as built: a checkpoint, speed-only synthetic data (random
        weights), or --epochs 0."""
        return bool(self.spec.checkpoint) or not self.data.labelled or self.spec.epochs == 0

    def base_key(self, seed: int) -> tuple:
        """Everything that makes the baseline's weights what they are."""
        spec = self.spec
        inputs = []  # only when set, so keys of runs without them stay as they were
        if spec.labels is not None:
            inputs += ["labels", spec.labels]
        if self._resizes_images():
            inputs += ["pipeline", self.pipeline.at(self.data.input_size).to_dict()]
        return ("baseline", *self.model_key, *_dataset_identity(spec, self.data),
                self.data.normalization, spec.epochs, seed, spec.lr, spec.batch_size,
                _file_digest(spec.checkpoint) if spec.checkpoint else None,
                precision_key(self.device, spec.fp32), *inputs)

    # -- the baseline --------------------------------------------------------------------

    def load_baseline(self, on_progress: ProgressFn | None = None,
                      should_stop: Callable[[], bool] | None = None,
                      seed: int | None = None) -> nn.Module:
        """The baseline trained with ``seed`` (the sweep's own by default), or loaded."""
        primary = seed is None or seed == self.spec.seed
        if primary and self.baseline is not None:
            return self.baseline
        t0, hits, misses = time.perf_counter(), self.cache.hits, self.cache.misses
        seed = self.spec.seed if seed is None else seed
        spec = self.spec
        if self._as_loaded():
            model = self._untrained if primary else self.baseline
        else:
            def report(fraction: float):
                if on_progress:
                    on_progress(ProgressEvent("baseline", -1, len(spec.variants),
                                              "training" if primary else f"training seed {seed}",
                                              fraction))

            data = self.data.train_data(spec.batch_size, seed)
            key = self.base_key(seed)

            def train(m: nn.Module):
                fit(m, data.epochs(key), spec.epochs, device=self.device, lr=spec.lr,
                    seed=seed, on_progress=report, should_stop=should_stop)
                if should_stop is not None and should_stop():
                    raise Cancelled()

            def build():
                torch.manual_seed(seed)
                return self._build(spec.model, weights=spec.weights, keep_head=self.keep_head)
            model = self.cache(key, build, train)
        model = model.to(self.device).eval()
        if primary:
            self.baseline = model
            self._untrained = None
            self.baseline_build = {"train_s": time.perf_counter() - t0,
                                   "cache": {"hits": self.cache.hits - hits,
                                             "misses": self.cache.misses - misses}}
        return model

    def attach_peaks(self, store=None) -> None:
        """The roofline's roofs in the environment card: measured once per machine, then read
        from ``store``."""
        from benchmarks.measure.peaks import sweep_peaks
        self.environment["peaks"] = sweep_peaks(store, self.device, self.threads)

    def baseline_cached(self) -> bool | None:
        """Whether the baseline's weights are in the cache already (None: nothing to train,
        a checkpoint, synthetic data or --epochs 0)."""
        if self._as_loaded():
            return None
        return self.cache.has(self.base_key(self.spec.seed))

    # -- variants ------------------------------------------------------------------------

    def context(self, on_phase: Callable[[str, float], None], *, seed: int | None = None,
                baseline: nn.Module | None = None, variant: VariantSpec | None = None,
                shared: dict | None = None) -> Context:
        d = self.data
        seed = self.spec.seed if seed is None else seed
        return Context(
            train=d.train_data(self.spec.batch_size, seed),
            example_input=self.example,
            num_classes=d.num_classes, in_channels=d.in_channels, device=self.device,
            epochs=self.spec.epochs, lr=self.spec.lr, seed=seed,
            teacher=baseline if baseline is not None else self.baseline,
            build_model=lambda name: self._build(name),
            default_student=default_student(self.spec.model),
            cached=self.cache, on_progress=on_phase, base_key=self.base_key(seed),
            train_amp=self._train_amp(variant), shared=shared)

    def _train_amp(self, variant: VariantSpec | None) -> str | None:
        """A chain that ends in fp16 AMP on CUDA fine-tunes under autocast with a GradScaler."""
        amp = dict(variant.settings).get("amp") if variant is not None else None
        if amp is None or len(variant.techniques) < 2 or self.device.type != "cuda":
            return None
        return "fp16" if amp.resolved("cuda") == "fp16" else None

    def build_variant(self, variant: VariantSpec, ctx: Context,
                      baseline: nn.Module | None = None) -> Outcome:
        baseline = baseline if baseline is not None else self.baseline
        if not variant.techniques:
            return Outcome(model=baseline)
        control = variant.control
        if control is not None:
            return control.apply_fn()(dict(variant.settings)[control.of], ctx)
        from optimizers import chain
        return chain.apply_chain(baseline, variant.steps, ctx)

    def run(self, on_progress: ProgressFn | None = None,
            should_stop: Callable[[], bool] | None = None,
            on_partial: PartialFn | None = None,
            on_environment: Callable[[dict], None] | None = None
            ) -> Iterator[VariantResult]:
        """Every variant's result, in the spec's order, once it is fully measured. (The
        environment is known before the run here; ``on_environment`` is for executors whose
        timing node is only known once they run.)"""
        stop = should_stop or (lambda: False)
        built: list[Built] = []
        # Training too runs on the pinned threads: on two cores, two threads contending with
        # the OS trained 5x slower than one.
        with pinned_threads(self.threads):
            try:
                self.load_baseline(on_progress, stop)
                if self.executor is not None:
                    self.executor.prefetch(self, on_progress, stop)
                shared: dict = {}
                budget = RESIDENT_SHARE * available_memory_bytes(self.device)
                resident = 0
                for index, variant in enumerate(self.spec.variants):
                    if stop():
                        raise Cancelled()
                    b = self._build_and_measure(index, variant, on_progress, stop, shared)
                    if b.model is not None:
                        need = state_bytes(b.model) + (b.result.peak_memory_bytes or 0)
                        if self.spec.timing == "sequential" or resident + need > budget:
                            self._time_alone(b, on_progress, stop, resident + need > budget
                                             and self.spec.timing != "sequential")
                        else:
                            resident += state_bytes(b.model)
                    built.append(b)
                    if b.model is not None and not b.result.timing:
                        b.result.timing = {"method": "pending",
                                           "reason": "timed once every variant is built"}
                    if on_partial is not None:
                        on_partial(index, b.result)
                del shared
                if self.spec.seeds > 1 and self.data.labelled:
                    self._other_seeds(built, on_progress, stop)
                self._time_interleaved(built, on_progress, stop)
            except Cancelled:
                self.cancelled = True
                for b in built:
                    if b.result.timing.get("method") in (None, "pending"):
                        b.result.timing = {"method": "not timed",
                                           "reason": "the sweep was cancelled"}
                    b.model = None
        for b in built:
            yield b.result

    def _build_and_measure(self, index: int, variant: VariantSpec,
                           on_progress: ProgressFn | None, stop: Callable[[], bool],
                           shared: dict) -> Built:
        spec = self.spec
        total = len(spec.variants)
        result = VariantResult(name=variant.name, techniques=list(variant.techniques),
                               config=variant.config(), device=str(self.device),
                               batch_size=spec.batch_size, axes=variant.axes_dict(),
                               started_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
        if not variant.techniques:
            result.warnings.extend(self.warnings)
        result.built_on = list(self.built_on.get(index, []))
        b = Built(index, result)
        if index in self.failed_builds:
            result.error = f"build failed: {self.failed_builds[index]}"
            if on_progress:
                on_progress(ProgressEvent(variant.name, index, len(self.spec.variants), "done",
                                          1.0))
            return b
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
            t0, hits, misses = time.perf_counter(), self.cache.hits, self.cache.misses
            outcome = self.build_variant(variant, self.context(
                lambda p, f: report(f"build: {p}", f), variant=variant, shared=shared))
            result.phase_s["build"] = time.perf_counter() - t0
            result.cache = {"hits": self.cache.hits - hits,
                            "misses": self.cache.misses - misses}
            if not variant.techniques and self.baseline_build:
                # The baseline's build is its training, done before the first variant.
                result.phase_s["build"] += self.baseline_build["train_s"]
                result.cache = dict(self.baseline_build["cache"])
            result.config = {**result.config, **outcome.config}
            if not variant.techniques:
                result.config["model"] = self.model_card
            device = outcome.device or self.device
            result.device = str(device)
            model = outcome.model
            if next(iter(model.parameters()), None) is not None and \
                    next(model.parameters()).device != device:
                model = model.to(device)
            model.eval()
            b.device, b.autocast_dtype = device, outcome.autocast_dtype
            b.example = self.example if outcome.memory_format is None else \
                self.example.contiguous(memory_format=outcome.memory_format)
            result.layer_sparsity = outcome.layer_sparsity

            enter("accuracy")
            t0 = time.perf_counter()
            if self.data.labelled:
                right = correctness(model, self.data.batches("test", ACCURACY_BATCH), device,
                                    outcome.autocast_dtype)
                result.accuracy = sum(right) / len(right) if right else None
                result.correct_bits, result.n_test = pack_bits(right), len(right)
                result.seeds, result.seed_accuracies = [spec.seed], [result.accuracy]
                if not variant.techniques:
                    self._check_near_chance(result, model, device)
            result.phase_s["accuracy"] = time.perf_counter() - t0

            enter("memory")
            t0 = time.perf_counter()
            result.peak_memory_bytes, result.memory_method = measure_peak_memory(
                model, b.example, device, autocast=b.autocast())
            result.phase_s["memory"] = time.perf_counter() - t0

            enter("size")
            t0 = time.perf_counter()
            result.size_bytes, result.size_gzip_bytes = serialized_size(model)
            result.params, result.nonzero_params = count_params(model)
            flops = outcome.flops_hint or count_flops(model, self.example[:1], device)
            if flops is not None:
                result.flops, result.flops_effective = flops.dense, flops.effective
            # The roofline's bytes moved: one forward of the timed batch, counted op by op.
            result.traffic_bytes = measure_traffic(model, self.example, device,
                                                           autocast=b.autocast())
            result.phase_s["size"] = time.perf_counter() - t0
            b.model = model
        except Cancelled:
            raise
        except Exception as exc:  # one variant's failure never sinks the sweep
            if machine.is_out_of_memory(exc):
                oom = "out of memory" if result.device.startswith("cuda") \
                    else machine.out_of_memory_label()
                result.error = f"{oom} on {result.device} during {phase}: {described(exc)}"
            else:
                result.error = f"{phase} failed: {described(exc)}"
        finally:
            if result.error is not None:
                b.model = None
                _release_memory()
        result.wall_s = time.perf_counter() - t_variant
        report("done", 1.0)
        return b

    def _check_near_chance(self, result: VariantResult, model: nn.Module,
                           device: torch.device) -> None:
        """A checkpoint's baseline near chance, or far below what another normalisation
        scores, almost always means inputs scaled otherwise than in its training: say which
        normalisation scores best, measured on the same test examples."""
        pretrained = self.spec.weights is not None and self.keep_head
        if not (self.spec.checkpoint or pretrained) or result.accuracy is None:
            return
        from benchmarks.report.stats import discordant, mcnemar_exact, unpack_bits
        from benchmarks.spec.sweep import NORMALIZE_MODES
        from benchmarks.zoo.datasets import renormalized
        name = Path(self.spec.checkpoint).name if self.spec.checkpoint else \
            f"{self.spec.model} {self.spec.weights}"
        mode = (self.data.normalization or {}).get("mode")
        mine = unpack_bits(result.correct_bits, result.n_test)
        best = None
        for other in NORMALIZE_MODES:
            if other == mode:
                continue
            x = renormalized(self.data, "test", other)
            right = correctness(model, ((x[i:i + ACCURACY_BATCH], self.data.test.y[
                i:i + ACCURACY_BATCH]) for i in range(0, len(x), ACCURACY_BATCH)), device)
            gain = 100 * (sum(right) - sum(mine)) / len(right)
            if gain >= BETTER_NORMALIZE_POINTS and mcnemar_exact(
                    *discordant(right, mine)) < 0.05 and (best is None or gain > best[1]):
                best = (other, gain, sum(right) / len(right))
        chance = 100.0 / self.data.num_classes
        if best is not None:
            result.warnings.append(
                f"the baseline loaded from {name} scores {100 * result.accuracy:.1f}% with "
                f"normalize {mode} but {100 * best[2]:.1f}% with {best[0]} on the same test "
                f"images: its training probably scaled inputs that way; give --normalize "
                f"{best[0]} (accepted: dataset|none|imagenet|MEAN,STD)")
        elif 100 * result.accuracy <= chance + NEAR_CHANCE_POINTS:
            result.warnings.append(
                f"the baseline loaded from {name} scores {100 * result.accuracy:.1f}%, near "
                f"chance ({chance:.1f}%): its inputs are probably scaled differently from its "
                f"training (normalize is {mode}); give --normalize dataset|none|imagenet|"
                f"MEAN,STD as it was trained")

    # -- seeds ---------------------------------------------------------------------------

    def _other_seeds(self, built: list[Built], on_progress: ProgressFn | None,
                     stop: Callable[[], bool]) -> None:
        """Rebuild every variant from a baseline trained with each further seed and score
        it. Failures there are noted on the variant; its main figures stand."""
        spec = self.spec
        total = len(spec.variants)
        for seed in range(spec.seed + 1, spec.seed + spec.seeds):
            if stop():
                raise Cancelled()
            baseline = self.load_baseline(on_progress, stop, seed=seed)
            shared: dict = {}
            for b in built:
                if stop():
                    raise Cancelled()
                if b.result.error is not None:
                    continue
                variant = self.spec.variants[b.index]
                name = variant.name
                if on_progress:
                    on_progress(ProgressEvent(name, b.index, total, f"seed {seed}", 0.0))
                try:
                    ctx = self.context(lambda p, f: on_progress and on_progress(ProgressEvent(
                        name, b.index, total, f"seed {seed}: {p}", f)), seed=seed,
                        baseline=baseline, variant=variant, shared=shared)
                    outcome = self.build_variant(variant, ctx, baseline)
                    device = outcome.device or self.device
                    model = outcome.model.eval()
                    right = correctness(model, self.data.batches("test", ACCURACY_BATCH),
                                        device, outcome.autocast_dtype)
                    b.result.seeds.append(seed)
                    b.result.seed_accuracies.append(sum(right) / len(right))
                except Cancelled:
                    raise
                except Exception as exc:
                    b.result.warnings.append(f"seed {seed} failed: {described(exc)}")
                    _release_memory()
            del baseline, shared
            _release_memory()

    # -- timing --------------------------------------------------------------------------

    def _visit(self, b: Built, runs: int, seconds: float, warmup: int) -> None:
        tracker = measure_latency(b.model, b.example, b.device,
                                          autocast=b.autocast(), min_runs=runs,
                                          min_time_s=seconds, warmup=warmup)
        b.samples.extend(tracker.samples_ms)
        b.host.extend(tracker.host_samples_ms)
        b.visits += 1
        b.result.phase_s["latency"] = b.result.phase_s.get("latency", 0.0) + tracker.wall_s

    def _finish_timing(self, b: Built, timing: dict) -> None:
        b.result.keep_samples("latency_samples_ms", b.samples)
        if b.device is not None and b.device.type == "cuda":
            b.result.keep_samples("host_samples_ms", b.host)
        b.result.timing = timing
        b.model = None

    def _time_alone(self, b: Built, on_progress: ProgressFn | None, stop: Callable[[], bool],
                    for_memory: bool) -> None:
        """Sequential timing right after the build: what does not fit beside the others."""
        if on_progress:
            on_progress(ProgressEvent(b.result.name, b.index, len(self.spec.variants),
                                      "latency"))
        started = time.time()
        try:
            self._visit(b, self.spec.min_runs, self.spec.min_time_s, self.spec.warmup)
        except Exception as exc:
            b.result.error = f"latency failed: {described(exc)}"
        reason = ("the variants do not fit in memory together" if for_memory
                  else "sequential timing was asked for")
        self._finish_timing(b, {"method": "sequential", "rounds": 1, "reason": reason,
                                "window": [round(started, 3), round(time.time(), 3)]})
        _release_memory()

    def _time_interleaved(self, built: list[Built], on_progress: ProgressFn | None,
                          stop: Callable[[], bool]) -> None:
        """Time the resident variants in round-robin rounds, each visit a slice of the
        budget, the starting variant rotating each round; every p50 is taken over all of a
        variant's samples. In a CUDA sweep whose INT8 variants run on the CPU, a CPU copy of
        the baseline is timed in the same rounds, as their reference."""
        spec = self.spec
        entries = [b for b in built if b.model is not None]
        if not entries:
            return
        base = next((b for b in entries if not b.result.techniques), None)
        cpu_ref = None
        if self.device.type != "cpu" and base is not None and any(
                b.device.type == "cpu" for b in entries):
            cpu_ref = Built(base.index, base.result, copy.deepcopy(base.model).cpu().eval(),
                            torch.device("cpu"), base.autocast_dtype, example=self.example)
            entries.append(cpu_ref)
        rounds = spec.timing_rounds
        started = time.time()
        runs = max(2, math.ceil(spec.min_runs / rounds))
        seconds = spec.min_time_s / rounds
        total = len(spec.variants)
        for r in range(rounds):
            start = r % len(entries)
            for b in entries[start:] + entries[:start]:
                if stop():
                    raise Cancelled()
                if on_progress:
                    on_progress(ProgressEvent(b.result.name, b.index, total,
                                              f"latency round {r + 1}/{rounds}",
                                              r / rounds))
                if b.result.error is not None:
                    continue
                try:
                    # The first visit warms up fully; later ones one call (caches, clocks).
                    self._visit(b, runs, seconds, spec.warmup if b.visits == 0 else 1)
                except Exception as exc:
                    b.result.error = f"latency failed: {described(exc)}"
        timing = {"method": "interleaved", "rounds": rounds,
                  "variants_together": len(entries) - (cpu_ref is not None),
                  "window": [round(started, 3), round(time.time(), 3)]}
        if cpu_ref is not None:
            base.result.keep_samples("cpu_latency_samples_ms", cpu_ref.samples)
            timing["cpu_baseline"] = "timed in the same rounds, for the CPU variants' ratios"
            entries.remove(cpu_ref)
        for b in entries:
            self._finish_timing(b, dict(timing))
        _release_memory()


def _check_data_paths(spec: SweepSpec, folder: Path) -> None:
    """Jobs from the dashboard read data only inside the operator's data folder."""
    if spec.dataset.startswith("imagefolder:"):
        inside(folder, spec.dataset.split(":", 1)[1])
    if spec.data_root:
        inside(folder, spec.data_root, "the data root")


def _release_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def prepare_sweep(spec: SweepSpec, *, cache: WeightsCache | None = None,
                  allowed_models_dir: str | Path | None = None,
                  allowed_data_dir: str | Path | None = None,
                  should_stop: Callable[[], bool] | None = None,
                  memory_share: float | None = None, executor=None) -> PreparedSweep:
    """Validate everything and load the data: ValueError (one line) for bad input, a sweep
    too large for memory included; ``Cancelled`` if ``should_stop`` says so while loading.
    ``executor``: where its trainable builds run (None: here; see benchmarks/executors)."""
    return PreparedSweep(spec, cache=cache, allowed_models_dir=allowed_models_dir,
                         allowed_data_dir=allowed_data_dir, should_stop=should_stop,
                         memory_share=memory_share, executor=executor)


def run_sweep(spec: SweepSpec, on_progress: ProgressFn | None = None,
              should_stop: Callable[[], bool] | None = None, *,
              cache: WeightsCache | None = None) -> Iterator[VariantResult]:
    """Validate (ValueError before the first result), then yield each variant's result."""
    sweep = prepare_sweep(spec, cache=cache)
    return sweep.run(on_progress, should_stop)
