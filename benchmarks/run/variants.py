"""One variant, built and measured but for its latency; and its further seeds, scored.

The build (from the shared baseline, never mutating it), then accuracy with its per-example
correctness, its layers against the baseline's (SQNR, cosine), peak memory, size, parameters, FLOPs and the bytes a forward moves, each phase
timed by ``PhaseTracker``. A variant that raises becomes a result with ``error`` set, naming
the phase; the sweep goes on.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from benchmarks.measure import machine
from benchmarks.measure.macs import mac_census
from benchmarks.measure.memory import measure_peak_memory, measure_traffic
from benchmarks.measure.size import serialized_size
from benchmarks.report.records import Provenance, Timing
from benchmarks.report.results import VariantResult
from benchmarks.report.stats import pack_bits, pack_labels
from benchmarks.run.checks import ACCURACY_BATCH, check_near_chance
from benchmarks.run.phases import PhaseTracker, ProgressFn, Report
from benchmarks.run.rounds import Built, release_memory
from benchmarks.spec.atomic import DiskFull
from benchmarks.sensitivity.diagnostics import variant_diagnostics
from benchmarks.spec.cancel import Cancelled
from benchmarks.spec.variant import VariantSpec
from optimizers.counting import count_flops, count_params
from optimizers.errors import described
from optimizers.training import correctness, outcomes

__all__ = ["build_and_measure", "other_seeds"]


def build_and_measure(sweep, index: int, variant: VariantSpec, report: Report,
                      stop: Callable[[], bool], shared: dict) -> Built:
    """``sweep`` is the ``PreparedSweep`` (its baseline loaded); ``shared`` what the
    variants of one pass share (a pruned model a chained variant starts from)."""
    spec = sweep.spec
    result = VariantResult(name=variant.name, techniques=list(variant.techniques),
                           config=variant.config(), device=str(sweep.device),
                           timing=Timing(batch_size=sweep.eval_batches[0]),
                           axes=variant.axes_dict(),
                           provenance=Provenance(started_at=time.strftime("%Y-%m-%dT%H:%M:%S")))
    if not variant.techniques:
        result.warnings.extend(sweep.warnings)
    result.provenance.built_on = list(sweep.built_on.get(index, []))
    b = Built(index, result)
    if index in sweep.failed_builds:
        result.error = f"build failed: {sweep.failed_builds[index]}"
        report(variant.name, index, "done", 1.0)
        return b
    t_variant = time.perf_counter()
    tracker = PhaseTracker(result.provenance.phase_s,
                           lambda p, f: report(variant.name, index, p, f),
                           stop)
    try:
        with tracker.track("build"):
            _build(sweep, b, variant, report, shared)
        model, device = b.model, b.device
        known = (sweep.known or {}).get(variant.stable_hash())
        if known is not None:  # an earlier wave's scores and costs: the same model's
            _reuse(result, known)
            b.model = model
            return _done(b, t_variant, report)
        b.model = None  # resident only once every phase succeeded
        with tracker.track("accuracy"):
            if sweep.data.labelled:
                right, predicted = outcomes(model, sweep.data.batches("test", ACCURACY_BATCH),
                                            device, b.autocast_dtype)
                result.scores.accuracy = sum(right) / len(right) if right else None
                result.scores.correct_bits, result.scores.n_test = pack_bits(right), len(right)
                result.scores.predictions = pack_labels(predicted) if predicted else None
                result.scores.seeds = [spec.seed]
                result.scores.seed_accuracies = [result.scores.accuracy]
                if not variant.techniques:
                    check_near_chance(sweep, result, model, device)
        with tracker.track("diagnostics"):
            if variant.techniques and sweep.baseline is not None:
                result.diagnostics = variant_diagnostics(
                    sweep.baseline, model, device, sweep.example, result.config,
                    variant.techniques, b.autocast())
        with tracker.track("memory"):
            result.cost.peak_memory_bytes, result.cost.memory_method = measure_peak_memory(
                model, b.example, device, autocast=b.autocast())
        with tracker.track("size"):
            result.cost.size_bytes, result.cost.size_gzip_bytes = serialized_size(model)
            result.cost.params, result.cost.nonzero_params = count_params(model)
            flops = b.flops_hint or count_flops(model, sweep.example[:1], device)
            if flops is not None:
                result.cost.flops, result.cost.flops_effective = flops.dense, flops.effective
            # The roofline's bytes moved: one forward of the timed batch, counted op by op.
            result.cost.traffic_bytes = measure_traffic(model, sweep.timed_example, device,
                                                   autocast=b.autocast())
            # The roofline's precision: the one most of its multiply-adds ran in.
            result.cost.mac_census = mac_census(model, sweep.timed_example, device,
                                           b.autocast_dtype)
        b.model = model
    except (Cancelled, DiskFull):  # a full disk fails every later variant too: the run ends
        raise
    except Exception as exc:  # one variant's failure never sinks the sweep
        phase = tracker.current
        if machine.is_out_of_memory(exc):
            oom = "out of memory" if result.device.startswith("cuda") \
                else machine.out_of_memory_label()
            result.error = f"{oom} on {result.device} during {phase}: {described(exc)}"
        else:
            result.error = f"{phase} failed: {described(exc)}"
    finally:
        if result.error is not None:
            b.model = None
            release_memory()
    return _done(b, t_variant, report)


def _done(b: Built, started: float, report: Report) -> Built:
    b.result.provenance.wall_s = time.perf_counter() - started
    report(b.result.name, b.index, "done", 1.0)
    return b


def _reuse(result: VariantResult, known: VariantResult) -> None:
    """What an earlier wave of the same sweep measured of the same variant, but its timing
    (this wave's own) and where and when it was built."""
    result.scores = dataclasses.replace(known.scores)
    result.cost = dataclasses.replace(known.cost, layer_sparsity=result.cost.layer_sparsity
                                      or known.cost.layer_sparsity)
    result.diagnostics = known.diagnostics
    result.warnings.extend(w for w in known.warnings if w not in result.warnings)


def _build(sweep, b: Built, variant: VariantSpec, report: Report, shared: dict) -> None:
    """The variant's model on its device, in eval mode, with what its outcome says about
    how it runs (autocast, memory format) and what it is (config, sparsity)."""
    result = b.result
    hits, misses = sweep.cache.hits, sweep.cache.misses
    outcome = sweep.build_variant(variant, sweep.context(
        lambda p, f: report(variant.name, b.index, f"build: {p}", f), variant=variant,
        shared=shared))
    result.provenance.cache = {"hits": sweep.cache.hits - hits,
                               "misses": sweep.cache.misses - misses}
    if not variant.techniques and sweep.baseline_build:
        # The baseline's build is its training, done before the first variant.
        result.provenance.phase_s["build"] = sweep.baseline_build["train_s"]
        result.provenance.cache = dict(sweep.baseline_build["cache"])
    result.config = {**result.config, **outcome.config}
    if not variant.techniques:
        result.config["model"] = sweep.model_card
    device = outcome.device or sweep.device
    result.device = str(device)
    model = outcome.model
    if next(iter(model.parameters()), None) is not None and \
            next(model.parameters()).device != device:
        model = model.to(device)
    model.eval()  # not chained: a pt2e graph's eval() returns None
    b.model, b.device, b.autocast_dtype = model, device, outcome.autocast_dtype
    # Timed at the first measured batch size (--eval-batch-size; the training batch size).
    timed = sweep.timed_example
    b.example = timed if outcome.memory_format is None else \
        timed.contiguous(memory_format=outcome.memory_format)
    b.threads = sweep.thread_counts[0]
    b.flops_hint = outcome.flops_hint
    result.cost.layer_sparsity = outcome.layer_sparsity


def other_seeds(sweep, built: list[Built], on_progress: ProgressFn | None, report: Report,
                stop: Callable[[], bool]) -> None:
    """Rebuild every variant from a baseline trained with each further seed and score it.
    Failures there are noted on the variant; its main figures stand."""
    spec = sweep.spec
    for seed in range(spec.seed + 1, spec.seed + spec.seeds):
        if stop():
            raise Cancelled()
        baseline = sweep.load_baseline(on_progress, stop, seed=seed)
        shared: dict = {}
        for b in built:
            if stop():
                raise Cancelled()
            if b.result.error is not None:
                continue
            variant = spec.variants[b.index]
            name = variant.name
            report(name, b.index, f"seed {seed}", 0.0)
            try:
                ctx = sweep.context(lambda p, f: report(name, b.index, f"seed {seed}: {p}", f),
                                    seed=seed, baseline=baseline, variant=variant,
                                    shared=shared)
                outcome = sweep.build_variant(variant, ctx, baseline)
                device = outcome.device or sweep.device
                model = outcome.model
                model.eval()
                right = correctness(model, sweep.data.batches("test", ACCURACY_BATCH), device,
                                    outcome.autocast_dtype)
                b.result.scores.seeds.append(seed)
                b.result.scores.seed_accuracies.append(sum(right) / len(right))
            except (Cancelled, DiskFull):
                raise
            except Exception as exc:
                b.result.warnings.append(f"seed {seed} failed: {described(exc)}")
                release_memory()
        del baseline, shared
        release_memory()
