import torch

from benchmarks.run.cache import WeightsCache
from benchmarks.run.runner import prepare_sweep, run_sweep
from benchmarks.spec.sweep import SweepSpec
from benchmarks.spec.variant import VariantSpec
from helpers import FAST_TIMING
from optimizers.settings import PruneSettings

# The spec's default training (the accuracy bounds below need it), the fast timing, two
# warm-up runs.
FAST = {**FAST_TIMING, "warmup": 2}


def test_baseline_on_digits_is_accurate_and_measured(tmp_path):
    results = list(run_sweep(SweepSpec(**FAST), cache=WeightsCache(tmp_path)))
    (r,) = results
    assert r.ok and r.name == "baseline" and r.techniques == []
    # One test image is 0.28 points; over seeds 0-4 the baseline reads 96.9-97.8%, each
    # with a 95% interval of about +-2 points: "accurate" is 96% and up, not a knife edge.
    assert r.scores.accuracy >= 0.96
    assert len(r.timing.latency_samples_ms) >= 10
    assert r.cost.peak_memory_bytes > 0 and r.cost.size_bytes > r.cost.size_gzip_bytes > 0
    assert r.cost.params == r.cost.nonzero_params > 0 and r.cost.flops > 0
    assert r.device == "cpu"


def test_second_run_trains_nothing(tmp_path):
    first = WeightsCache(tmp_path)
    sweep = prepare_sweep(SweepSpec(**FAST), cache=first)
    a = list(sweep.run())[0]
    assert (first.hits, first.misses) == (0, 1)
    second = WeightsCache(tmp_path)
    b = list(prepare_sweep(SweepSpec(**FAST), cache=second).run())[0]
    assert (second.hits, second.misses) == (1, 0)
    assert a.scores.accuracy == b.scores.accuracy
    # A different budget is a different key.
    third = WeightsCache(tmp_path)
    list(prepare_sweep(SweepSpec(epochs=1, **FAST), cache=third).run())
    assert third.misses == 1


def test_a_failing_variant_is_isolated(tmp_path, monkeypatch):
    from optimizers import chain

    def explode(model, steps, ctx):
        raise RuntimeError("this layer type is not supported\nsecond line")

    monkeypatch.setattr(chain, "apply_chain", explode)
    spec = SweepSpec(variants=(SweepSpec().variants[0],
                               VariantSpec("prune-l1-0.5", ("prune",), prune=PruneSettings(0.5)),
                               VariantSpec("prune-l1-0.3", ("prune",), prune=PruneSettings(0.3))),
                     **FAST)
    results = list(run_sweep(spec, cache=WeightsCache(tmp_path)))
    assert [r.name for r in results] == ["baseline", "prune-l1-0.5", "prune-l1-0.3"]
    assert results[0].ok
    assert results[1].error == "build failed: RuntimeError: this layer type is not supported"
    assert not results[2].ok


def test_out_of_memory_fails_only_that_variant(tmp_path, monkeypatch):
    from benchmarks.run import variants
    real = variants.measure_peak_memory
    calls = []

    def oom_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(*args, **kwargs)

    monkeypatch.setattr(variants, "measure_peak_memory", oom_once)
    spec = SweepSpec.from_toggles(amp=True, **FAST)
    results = list(run_sweep(spec, cache=WeightsCache(tmp_path)))
    assert results[0].error.startswith("out of memory on cpu during memory")
    assert results[1].ok


def test_should_stop_ends_between_phases(tmp_path):
    spec = SweepSpec.from_toggles(amp=True, **FAST)
    sweep = prepare_sweep(spec, cache=WeightsCache(tmp_path))
    seen = []
    results = list(sweep.run(on_progress=lambda e: seen.append((e.variant, e.phase)),
                             should_stop=lambda: ("baseline", "done") in seen))
    assert [r.name for r in results] == ["baseline"]
    assert sweep.cancelled


def test_synthetic_is_speed_only(tmp_path):
    spec = SweepSpec(model="mlp", dataset="synthetic", input_shape=(3, 16, 16), **FAST)
    (r,) = list(run_sweep(spec, cache=WeightsCache(tmp_path)))
    assert r.ok and r.scores.accuracy is None and r.timing.latency.n >= 10
