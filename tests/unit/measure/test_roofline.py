"""The roofline: its arithmetic on a fake device with known peaks, the device's measured peaks
(cached in the store per machine), and ResNet-18's baseline placed below both roofs."""

from __future__ import annotations

import pytest
import torch

from benchmarks.measure import roofline
from benchmarks.report.document import RunReport
from benchmarks.report.results import VariantResult

# A fake device: 100 GFLOP/s fp32, 400 bf16, 800 int8; 10 GB/s. Its ridge points are at
# 10, 40 and 80 FLOPs per byte.
FAKE_PEAKS = {"cpu": {"gemm_flops_per_s": {"fp32": 100e9, "bf16": 400e9, "int8": 800e9},
                      "memory_bytes_per_s": 10e9, "threads": 1}}
ENV = {"peaks": FAKE_PEAKS}


def variant(name, *, flops=1_000_000, p50_ms=1.0, traffic=100_000, batch=10, config=None,
            techniques=()):
    return VariantResult(name=name, techniques=list(techniques), config=config or {},
                         latency_samples_ms=[p50_ms] * 11, batch_size=batch, flops=flops,
                         flops_effective=flops, traffic_bytes=traffic)


def test_roofline_arithmetic_on_a_fake_device():
    # 1e6 FLOPs per sample x 10 per batch in 1 ms: 10 GFLOP/s; 1e7 FLOPs over 1e5 bytes: 100.
    point = variant("a").roofline(ENV)
    assert point["achieved_flops_per_s"] == pytest.approx(10e9)
    assert point["arithmetic_intensity"] == pytest.approx(100.0)
    assert point["precision"] == "fp32" and point["peak_flops_per_s"] == 100e9
    assert point["percent_of_peak"] == pytest.approx(10.0)
    # Intensity 100 is past fp32's ridge (10): the flat roof binds.
    assert point["bound"] == "compute" and point["roof_flops_per_s"] == pytest.approx(100e9)
    # Moving 1e7 bytes for the same work: intensity 1, under the slanted roof at 10 GFLOP/s.
    slow = variant("b", traffic=10_000_000).roofline(ENV)
    assert slow["arithmetic_intensity"] == pytest.approx(1.0)
    assert slow["bound"] == "memory" and slow["roof_flops_per_s"] == pytest.approx(10e9)
    assert roofline.ridge_point(100e9, 10e9) == pytest.approx(10.0)
    assert roofline.roof(5.0, 100e9, 10e9) == pytest.approx(50e9)
    with pytest.raises(ValueError, match="positive"):
        roofline.roof(0.0, 100e9, 10e9)


def test_each_variant_is_held_to_the_peak_of_its_own_precision():
    int8 = variant("q", p50_ms=0.5, config={"int8": {"mode": "static", "path": "fx"}},
                   techniques=["int8"]).roofline(ENV)
    assert int8["precision"] == "int8"
    assert int8["percent_of_peak"] == pytest.approx(100 * 20e9 / 800e9)
    amp = variant("m", config={"amp": {"dtype": "bf16"}}, techniques=["amp"]).roofline(ENV)
    assert amp["precision"] == "bf16" and amp["percent_of_peak"] == pytest.approx(2.5)
    # AMP skipped after INT8, and torchao's pt2e reference graph (float compute): not bf16/int8.
    skipped = {"int8": {"path": "fx"}, "amp": {"dtype": "bf16", "skipped": "INT8"}}
    assert roofline.variant_precision(skipped, {}, "cpu") == "int8"
    assert roofline.variant_precision({"int8": {"path": "pt2e"}}, {}, "cpu") == "fp32"
    tf32 = {"precision": {"fp32": "tf32"}}
    assert roofline.variant_precision({}, tf32, "cuda:0") == "tf32"
    assert roofline.variant_precision({}, tf32, "cpu") == "fp32"


def test_missing_inputs_leave_the_figures_empty_not_wrong():
    assert variant("a").roofline({})["percent_of_peak"] is None  # no peaks measured
    untimed = variant("b", p50_ms=1.0)
    untimed.latency_samples_ms = []
    assert untimed.roofline(ENV)["achieved_flops_per_s"] is None
    assert variant("c", traffic=None).roofline(ENV)["arithmetic_intensity"] is None
    on_gpu = variant("d")
    on_gpu.device = "cuda:0"  # no peaks for that device in the card
    assert on_gpu.roofline(ENV)["percent_of_peak"] is None


def test_the_json_table_and_chart_carry_the_roofline():
    report = RunReport(environment=ENV, variants=[variant("baseline"), variant(
        "q", p50_ms=0.5, config={"int8": {"path": "fx"}}, techniques=["int8"])],
        baseline="baseline")
    doc = report.document()
    base, q = doc["variants"]
    assert base["achieved_flops_per_s"] == pytest.approx(10e9)
    assert base["percent_of_peak"] == pytest.approx(10.0)
    assert q["roofline"]["precision"] == "int8" and q["roofline"]["traffic_bytes"] == 100_000
    assert VariantResult.from_dict(base).traffic_bytes == 100_000  # kept in raw
    rows = report.rows()
    assert [r["percent_of_peak"] for r in rows] == pytest.approx([10.0, 2.5])
    assert "% peak" in report.table() and "10.0" in report.table()
    from benchmarks.report.figures import roofline_chart, run_figures
    fig = roofline_chart(rows, FAKE_PEAKS)
    roofs = [t for t in fig.data if t.mode == "lines"]
    points = [t for t in fig.data if t.mode == "markers"]
    assert sorted(t.name for t in roofs) == ["bf16 roof", "fp32 roof", "int8 roof"]
    assert [t.y[0] * 1e9 for t in points] == pytest.approx([10e9, 20e9])
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert "roofline" in run_figures(report) and "roofline" not in run_figures(
        RunReport(variants=report.variants, baseline="baseline"))


def test_peaks_are_measured_once_per_machine_and_cached_in_the_store(tmp_path):
    from benchmarks.measure import peaks
    from benchmarks.store.database import ResultsStore
    store = ResultsStore(tmp_path / "s.db")
    cpu = torch.device("cpu")
    first = peaks.cached_peaks(store, cpu, 1)
    assert set(first["gemm_flops_per_s"]) == {"fp32", "bf16", "int8"}
    assert all(v > 1e8 for v in first["gemm_flops_per_s"].values())
    assert first["memory_bytes_per_s"] > 1e8 and first["threads"] == 1
    assert first["method"]["kernels"]["int8"] in ("torch._int_mm", "quantized.linear (x86)")
    again = ResultsStore(tmp_path / "s.db")
    assert peaks.cached_peaks(again, cpu, 1) == first  # read back, not measured again
    with again.connect() as db:
        assert db.execute("SELECT COUNT(*) FROM device_peaks").fetchone()[0] == 1
    assert again.device_peaks({**peaks.peaks_key(cpu, 1), "torch": "0.0"}) is None


def test_the_int8_peak_falls_back_to_the_quantized_linear_kernels():
    from benchmarks.measure.peaks import int8_gemm_call
    kernel, call = int8_gemm_call(torch.device("cpu"), 64, kernel="quantized_linear")
    assert kernel.startswith("quantized.linear")
    out = call()
    assert out.shape == (64, 64) and out.is_quantized


def test_resnet18_baseline_sits_below_both_roofs():
    """The device's measured roofs bound what a real network reaches: ResNet-18's fp32
    baseline is under the compute roof and under the memory roof at its intensity."""
    from benchmarks.measure.environment import default_threads
    from benchmarks.measure.latency import measure_latency, pinned_threads
    from benchmarks.measure.memory import measure_traffic
    from benchmarks.measure.peaks import measure_peaks
    from benchmarks.report.results import LatencyStats
    from benchmarks.zoo.models import create_model
    from optimizers.counting import count_flops
    cpu = torch.device("cpu")
    threads = default_threads()
    peaks = measure_peaks(cpu, threads)
    torch.manual_seed(0)
    model = create_model("resnet18", 10, 3, (32, 32)).eval()
    x = torch.randn(16, 3, 32, 32)
    with pinned_threads(threads):
        samples = measure_latency(model, x, cpu, min_time_s=0.3).samples_ms
    flops = count_flops(model, x[:1], cpu).dense
    result = VariantResult("baseline", latency_samples_ms=samples, batch_size=16, flops=flops,
                           traffic_bytes=measure_traffic(model, x, cpu))
    point = result.roofline({"peaks": {"cpu": peaks}})
    assert LatencyStats.from_samples(samples, 16).p50 > 0
    assert 0 < point["achieved_flops_per_s"] < peaks["gemm_flops_per_s"]["fp32"]
    memory_roof = point["arithmetic_intensity"] * peaks["memory_bytes_per_s"]
    assert point["achieved_flops_per_s"] < memory_roof
    assert 0 < point["percent_of_peak"] < 100
