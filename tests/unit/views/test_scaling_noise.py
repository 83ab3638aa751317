"""The Distributed figures' noise (issue 32.11): each run's throughput interval from its step
times, an efficiency's interval from its run's and its one-worker reference's, one-worker
runs apart beyond their noise flagged, comparisons within noise said so."""

from __future__ import annotations

from benchmarks.distributed.record import ScalingRun
from benchmarks.views.scaling import (efficiency_interval, interval_text, noise_warnings,
                                      throughput_interval, within_noise)


def _run(name, workers, compression, throughput, steps_ms, **more):
    return ScalingRun.from_dict({"name": name, "workers": workers, "compression": compression,
                                 "amp": False, "throughput": throughput,
                                 "step_ms_samples": steps_ms, "error": None, **more})


def test_intervals_carry_the_step_times_spread_and_alike_runs_pass_quietly():
    steady = [10.0, 10.2, 9.8, 10.1, 9.9] * 4
    one = _run("w1-none", 1, "none", 1000.0, steady)
    low, high = throughput_interval(one)
    assert low < 1000.0 < high and high / low < 1.05
    assert throughput_interval(_run("w1-x", 1, "none", 1000.0, [10.0])) is None
    two = _run("w2-none", 2, "none", 1800.0, steady, scaling_efficiency=0.9)
    e_low, e_high = efficiency_interval(two, [one, two])
    assert e_low < 0.9 < e_high
    assert interval_text((e_low, e_high), percent=True).endswith("%")
    # Alike within their noise: no warning.
    assert noise_warnings([one, _run("w1-fp16", 1, "fp16", 1005.0, steady)]) == []


def test_runs_that_differ_by_noise_are_said_so_and_alike_runs_apart_are_flagged():
    steady, spread = [10.0, 10.2, 9.8, 10.1, 9.9] * 4, [5.0, 15.0, 8.0, 12.0] * 5
    apart = noise_warnings([_run("w1-none", 1, "none", 1750.0, steady),
                            _run("w1-fp16", 1, "fp16", 1000.0, steady)])
    assert len(apart) == 1 and "differ 1.75x" in apart[0] and "Rerun" in apart[0]
    # Without step times the gap alone is flagged, saying the noise is unknown.
    [unknown] = noise_warnings([_run("a", 1, "none", 1750.0, []),
                                _run("b", 1, "fp16", 1000.0, [])])
    assert "not recorded" in unknown
    [same] = within_noise([_run("w2-none", 2, "none", 2000.0, spread),
                           _run("w2-fp16", 2, "fp16", 1900.0, spread)])
    assert "within noise" in same and "1.05x" in same


def test_a_stored_run_reads_as_its_record_whatever_it_lacks():
    """A failed run (no figures), an older one (no step times, no name) and a NaN from a
    broken rank read as records the charts skip or draw without an interval."""
    failed = ScalingRun.from_dict({"workers": 2, "compression": "fp16", "throughput": None,
                                   "error": "rank 1 died"})
    assert failed.name == "w2-fp16" and not failed.measured and failed.series == "fp16"
    broken = ScalingRun.from_dict({"name": "w1", "workers": 1, "throughput": float("nan"),
                                   "amp": True, "step_ms_samples": [10.0, -1.0, None]})
    assert broken.throughput is None and broken.series == "none +amp"
    assert broken.step_ms_samples == (10.0,) and throughput_interval(broken) is None
    assert noise_warnings([failed, broken]) == [] and within_noise([failed, broken]) == []
