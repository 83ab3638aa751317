"""The sweep runner: SweepSpec -> one VariantResult per variant.

``prepare_sweep`` checks everything a user can get wrong (model, data, checkpoint, input
shape) before anything runs and raises ``ValueError`` with one line. ``PreparedSweep.run``
then trains or loads the baseline and works in three passes:

1. build every variant and measure what does not depend on the clock (accuracy with its
   per-example correctness, peak memory, size, FLOPs: ``variants.py``); each is handed to
   ``on_partial`` as soon as it is measured, so the store and the UI see partial sweeps;
2. with ``seeds`` > 1, rebuild every variant from a baseline trained with each further seed
   and score it (accuracy only: timings are not repeated per seed);
3. time every variant together, in interleaved round-robin rounds (``rounds.py``), so drift
   of a noisy host hits every variant alike; variants that do not fit in memory together are
   timed one by one right after their build instead, and say so. A peak some variant then
   ran above is measured again (``roofs.py``).

With deployment axes (``--runtime``, ``--eval-batch-size``, ``--threads``) each variant also
has runtime cells (``cells.py``), built right after it and timed in the same rounds; they are
yielded after the variants, in a fixed order.

What is checked before anything runs is in ``checks.py``.

A variant that raises becomes a result with ``error`` set and the sweep goes on; no variant
mutates the model it was given (the baseline is shared by every variant and may be cached by
a server). Every training step draws its data order and initial weights from its own key, so
a result never depends on the cache's state or on what ran before it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Iterator
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
from benchmarks.measure.latency import pinned_threads
from benchmarks.measure.memory import state_bytes
from benchmarks.report.results import VariantResult
from benchmarks.run.cache import WeightsCache
from benchmarks.run.checks import (
    ACCURACY_BATCH,
    check_data_paths,
    model_card,
    normalization,
    preflight,
)
from benchmarks.run.phases import ProgressEvent, ProgressFn, reporter
from benchmarks.run.roofs import check_roofs
from benchmarks.run.rounds import Built, time_alone, time_interleaved
from benchmarks.spec import runtimes as runtime_registry
from benchmarks.run.variants import build_and_measure, other_seeds
from benchmarks.spec.cancel import Cancelled
from benchmarks.spec.sweep import SweepSpec
from benchmarks.spec.variant import VariantSpec
from benchmarks.zoo.checkpoints import load_into, read_state_dict
from benchmarks.zoo.datasets import DataBundle, load_dataset, stored_size
from benchmarks.zoo.inputs import pipeline_record
from benchmarks.zoo.models import build_model, check_input_fits, default_student, model_source
from optimizers import registry
from optimizers.base import Budget, Context, Data, Hooks, Lineage, Outcome, Teaching
from optimizers.training import fit

__all__ = ["ACCURACY_BATCH", "PreparedSweep", "ProgressEvent", "prepare_sweep", "run_sweep"]

PartialFn = Callable[[int, VariantResult], None]
# Variants are kept resident for interleaved timing while their weights and one forward's
# peak fit in this share of the memory available when the sweep starts.
RESIDENT_SHARE = 0.25


def _file_digest(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _dataset_identity(spec: SweepSpec, data: DataBundle) -> list:
    if spec.dataset.startswith("imagefolder:"):
        # What was decoded, not where the files are or when they were written: the key
        # seeds the training's order too.
        return ["imagefolder", data.provenance["sha256"][:16], list(data.input_shape)]
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
        runtime_registry.check_available(spec.runtimes)
        if executor is None:  # a Ray node times the sweep on its own cores
            runtime_registry.check_threads([spec.threads, *spec.thread_counts])
        # The deployment axes: the first batch size and thread count are the variants' own
        # rows; the others (and the other runtimes) are runtime cells.
        self.eval_batches = spec.eval_batch_sizes or (spec.batch_size,)
        self.thread_counts = spec.thread_counts or (self.threads,)
        self.source = model_source(spec.model)
        self.source.check(spec.model)
        preflight(spec)
        self.warnings: list[str] = []
        # Pretrained weights: the file must be in the local cache (one line naming it and its
        # folder otherwise, before any data loads); their transforms say how inputs look.
        self.pipeline = None
        if spec.weights is not None:
            self.source.weights_file(spec.model, spec.weights, spec.download)
            self.pipeline = self.source.pipeline(spec.model, spec.weights)
        self.normalize = normalization(spec, self.pipeline, self.warnings)
        self.keep_head = spec.labels == "imagenet"
        input_shape = spec.input_shape
        if input_shape is None and self.pipeline is not None and spec.dataset == "synthetic":
            input_shape = self.pipeline.shape
        self.allowed_models_dir = allowed_models_dir
        if allowed_data_dir is not None:
            check_data_paths(spec, Path(allowed_data_dir))
        self.footprint = self._admit(memory_share, input_shape)
        self.data = load_dataset(spec.dataset, spec.data_root, spec.download, input_shape,
                                 spec.seed, normalize=self.normalize, labels=spec.labels,
                                 pipeline=self.pipeline, should_stop=should_stop,
                                 resize=spec.resize)
        torch.manual_seed(spec.seed)
        model = self._build(spec.model, weights=spec.weights, keep_head=self.keep_head,
                            download=spec.download)
        self.example = self.data.example_batch(spec.batch_size)
        self.timed_example = self.example if self.eval_batches[0] == spec.batch_size else \
            self.data.example_batch(self.eval_batches[0])
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
        self.model_card = model_card(spec, self.source, self.data, self.keep_head,
                                     self.warnings)
        self.environment = environment_card(self.device, self.threads)
        self.environment["precision"] = apply_precision(self.device, spec.fp32)
        if spec.has_cells:
            self.environment["runtimes"] = {name: runtime_registry.get(name).version()
                                            for name in spec.runtimes}
            self.environment["eval_batch_sizes"] = list(self.eval_batches)
            self.environment["thread_counts"] = list(self.thread_counts)
        self.environment["model"] = self.model_card
        self.environment["memory"] = {"estimated_peak_bytes": self.footprint.total,
                                      "estimate": dataclasses.asdict(self.footprint),
                                      "limit_bytes": machine.memory_limit()}
        self.environment["data"] = {"dataset": spec.dataset,
                                    "input_shape": list(self.data.input_shape),
                                    "normalization": self.data.normalization,
                                    "test_examples": len(self.data.test),
                                    "provenance": self.data.provenance}
        self.environment["data"]["pipeline"] = pipeline_record(
            spec.dataset, self.data.input_size, spec.resize, self.pipeline)
        self.baseline: nn.Module | None = None
        self.baseline_build: dict = {}  # time and cache use of the primary baseline's training
        self.cancelled = False
        self.peaks_store = None
        # {variant index: runtimes}: the only runtime cells a run builds (a recommendation's
        # wave asks each trial's runtime of its own variant); None: every cell of the spec.
        self.cell_plan: dict | None = None
        # Called with (a variant's Built, it or one of its cells) while its model is resident,
        # before it is timed: a capped profile's process reads the kernels each runs
        # (``benchmarks.run.profiles``). None: nothing is read.
        self.on_resident: Callable[[Built, Built], None] | None = None
        # A recommendation runs this sweep once per wave. What one wave measured of a variant
        # it builds again (its stable hash: the same weights, the same model) is its scores
        # and costs in the next: a later wave builds and times it but scores nothing again
        # (the baseline's 2,500 mnist5k images took 3.3 s of every 10 s wave). And the work
        # its techniques share (the teacher's logits) outlives a wave. None: a sweep of its
        # own, measured whole.
        self.known: dict[str, VariantResult] | None = None
        self.shared: dict | None = None

    def _admit(self, memory_share: float | None, input_shape):
        """Refuse, before the data set is loaded or a weight allocated, a sweep whose
        estimated peak memory is more than it may use (footprint.py); its estimate."""
        from benchmarks.run.footprint import admit_sweep
        from benchmarks.spec.limits import Limits
        spec = self.spec
        size = stored_size(spec.dataset, spec.data_root, input_shape, spec.labels,
                           self.pipeline)
        share = memory_share if memory_share is not None else Limits.from_env().memory_share

        def build() -> nn.Module:
            # Random weights: the estimate needs the structure, not the trained values.
            return build_model(spec.model, size.classes, size.shape[0], size.shape[1:],
                               self.allowed_models_dir, keep_head=self.keep_head)
        gpu_free = available_memory_bytes(self.device) if self.device.type == "cuda" else None
        return admit_sweep(spec, size, build, share, gpu_free)

    def _resizes_images(self) -> bool:
        """The weights' resize and crop shape an image folder's pixels (other data sets keep
        their own; the mean and std apply to every one)."""
        return self.pipeline is not None and self.spec.dataset.startswith("imagefolder:")

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
        folder = spec.dataset.startswith("imagefolder:")
        if folder and (spec.resize == "squash") == (self.pipeline is not None):
            # Squashing was the default without weights (keys kept); cropping with weights.
            inputs += ["resize", spec.resize]
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
                reporter(on_progress, len(spec.variants))(
                    "baseline", -1, "training" if primary else f"training seed {seed}", fraction)

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
        self.peaks_store = store  # where a peak measured again after the timing is kept

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
            data=Data(train=d.train_data(self.spec.batch_size, seed), example_input=self.example,
                      num_classes=d.num_classes, in_channels=d.in_channels),
            device=self.device,
            budget=Budget(epochs=self.spec.epochs, lr=self.spec.lr, seed=seed,
                          amp=self._train_amp(variant)),
            teaching=Teaching(teacher=baseline if baseline is not None else self.baseline,
                              build_model=lambda name: self._build(name),
                              default_student=default_student(self.spec.model)),
            lineage=Lineage(base_key=self.base_key(seed)),
            hooks=Hooks(cached=self.cache, on_progress=on_phase, shared=shared))

    def _train_amp(self, variant: VariantSpec | None) -> str | None:
        """The autocast dtype a chain's fine-tuning runs under, where one of its techniques
        asks for one (``Technique.train_dtype``: fp16 AMP on CUDA, with a GradScaler)."""
        if variant is None or len(variant.techniques) < 2 or variant.control is not None:
            return None
        for name, settings in variant.steps:
            dtype = registry.get(name).train_dtype(settings, self.device.type)
            if dtype is not None:
                return dtype
        return None

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
        environment is known before the run here but for the cores its threads claim:
        ``on_environment`` gets it with them, as it does an executor's timing node, known
        only once it runs.)"""
        stop = should_stop or (lambda: False)
        report = reporter(on_progress, len(self.spec.variants))
        built: list[Built] = []
        cells: list[Built] = []
        deployment = None
        if self.spec.has_cells:
            from benchmarks.run.cells import Cells, energy_pass, sync_seeds
            deployment = Cells(self)
        # Training too runs on the pinned threads: on two cores, two threads contending with
        # the OS trained 5x slower than one.
        with pinned_threads(self.threads) as claim:
            if claim is not None:  # the cores are known once claimed, here
                self.environment["pinning"] = claim.to_dict()
                if on_environment is not None:
                    on_environment(self.environment)
            try:
                self.load_baseline(on_progress, stop)
                if self.executor is not None:
                    self.executor.prefetch(self, on_progress, stop)
                self._build_all(built, report, stop, on_partial, deployment, cells)
                if self.spec.seeds > 1 and self.data.labelled:
                    other_seeds(self, built, on_progress, report, stop)
                if deployment is not None:
                    sync_seeds(cells, built)
                time_interleaved(built + cells, self.spec, self.device, self.timed_example,
                                 report, stop,
                                 after_rounds=energy_pass if deployment is not None else None)
                # Runtime cells too: a cell above its roof has that peak measured again.
                if check_roofs([b.result for b in built + cells], self.environment,
                               self.peaks_store, self.threads) \
                        and on_environment is not None:
                    on_environment(self.environment)
            except Cancelled:
                self.cancelled = True
                for b in built + cells:
                    if b.result.timing.how.get("method") in (None, "pending"):
                        b.result.timing.how = {"method": "not timed",
                                           "reason": "the sweep was cancelled"}
                    b.model = None
            finally:
                if deployment is not None:
                    deployment.close()
        for b in built + cells:
            yield b.result

    def _build_all(self, built: list[Built], report, stop: Callable[[], bool],
                   on_partial: PartialFn | None, deployment=None,
                   cells: list[Built] | None = None) -> None:
        """Build and measure every variant (and its runtime cells), keeping those that fit
        resident for the interleaved rounds; the others are timed alone at once."""
        shared: dict = self.shared if self.shared is not None else {}
        budget = RESIDENT_SHARE * available_memory_bytes(self.device)
        resident = 0
        for index, variant in enumerate(self.spec.variants):
            if stop():
                raise Cancelled()
            b = build_and_measure(self, index, variant, report, shared=shared, stop=stop)
            mine = deployment.build(b, variant, report, stop) if deployment is not None else []
            if self.on_resident is not None:
                for one in [b, *mine]:
                    if one.model is not None:
                        self.on_resident(b, one)
            if b.model is not None:
                held = state_bytes(b.model) + sum(c.result.cost.size_bytes or 0 for c in mine
                                                  if c.model is not None and c.model is not b.model)
                need = held + (b.result.cost.peak_memory_bytes or 0)
                too_big = resident + need > budget
                if self.spec.timing == "sequential" or too_big:
                    for one in [b, *mine]:
                        if one.model is not None:
                            time_alone(one, self.spec, report,
                                       too_big and self.spec.timing != "sequential")
                else:
                    resident += held
            built.append(b)
            for one in [b, *mine]:
                if one.model is not None and not one.result.timing.how:
                    one.result.timing.how = {"method": "pending",
                                         "reason": "timed once every variant is built"}
            if on_partial is not None:
                on_partial(index, b.result)
                for cell in mine:
                    on_partial(cell.position, cell.result)
            if cells is not None:
                cells.extend(mine)


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
