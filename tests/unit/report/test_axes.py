"""Axes a person can read: layers named like numbers stay categories (seed_cnn's "0", "2", "5"
were drawn on a -1...6 axis), and log axes are ticked at decades with full labels (plotly's
default read "2 5 1 2 5 10 2 5 100")."""

from __future__ import annotations

import math

import pytest

from benchmarks.report.figures import latency_chart, layer_chart, sparsity_chart
from benchmarks.report.style import log_ticks


def _is_decade(value: float) -> bool:
    return math.isclose(math.log10(value), round(math.log10(value)), abs_tol=1e-9)


@pytest.mark.parametrize("low, high", [(0.7, 2300.0), (0.013, 45.0), (3.0, 9000.0)])
def test_log_ticks_over_several_decades_are_the_decades_labelled_in_full(low, high):
    ticks = log_ticks(low, high)
    assert ticks["type"] == "log" and len(ticks["tickvals"]) >= 3
    assert all(_is_decade(v) and low <= v <= high for v in ticks["tickvals"])
    assert not {"2", "5"} & set(ticks["ticktext"])
    assert ticks["ticktext"][:2] in (["1", "10"], ["0.1", "1"], ["10", "100"])


def test_a_narrow_log_range_adds_two_and_five_times_the_decades_in_full():
    ticks = log_ticks(1.5, 60.0)
    assert ticks["tickvals"] == [2.0, 5.0, 10.0, 20.0, 50.0]
    assert ticks["ticktext"] == ["2", "5", "10", "20", "50"]
    assert log_ticks(2000.0, 30000.0)["ticktext"] == ["2k", "5k", "10k", "20k"]
    assert log_ticks(0.0, 10.0) == {}  # nothing positive to place a log axis on


def test_latency_with_long_tails_is_on_a_log_axis_ticked_at_decades():
    rows = [{"variant": "baseline", "is_baseline": True, "p50_ms": 1.0, "p90_ms": 2.0,
             "p99_ms": 900.0},
            {"variant": "int8-static", "p50_ms": 0.2, "p90_ms": 0.3, "p99_ms": 0.4}]
    axis = latency_chart(rows).layout.xaxis
    assert axis.type == "log"
    assert list(axis.ticktext) == ["1", "10", "100"]  # p50 0.2 ms to p99 900 ms


def test_layers_named_like_numbers_are_categories_on_every_layer_chart():
    sparsity = {"0": 0.5, "2": 0.49, "5": 0.51}
    assert layer_chart("prune-l1-0.5", sparsity).layout.yaxis.type == "category"
    fig = sparsity_chart({"prune-l1-0.5": sparsity, "prune-l1-0.7": sparsity})
    assert fig.layout.yaxis.type == "category" and fig.layout.xaxis.type == "category"
    assert list(fig.data[0].y) == ["0", "2", "5"]


def test_the_roofline_and_the_per_layer_sqnr_read_the_same_way():
    """What the tour (tests/system/test_tour.py) found still drawn the old way: the roofline's
    log axes with plotly's own ticks, the per-layer SQNR's layers on a number axis."""
    from benchmarks.views.sensitivity import layers_chart
    from benchmarks.report.roofline_chart import roofline_chart
    peaks = {"cpu": {"gemm_flops_per_s": {"fp32": 100e9}, "memory_bytes_per_s": 20e9}}
    rows = [{"variant": "baseline", "is_baseline": True, "precision": "fp32", "device": "cpu",
             "achieved_flops_per_s": 10e9, "arithmetic_intensity": 5.0}]
    fig = roofline_chart(rows, peaks)
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert axis.type == "log" and axis.tickmode == "array", axis
        values = [float(t.replace(",", "")) for t in axis.ticktext]
        assert values == sorted(values) and len(values) >= 2, axis.ticktext
    sqnr = layers_chart({"layers": [{"layer": name, "sqnr_db": 30.0, "cosine": 0.99}
                                    for name in ("0", "2", "5")]}, "per-layer SQNR")
    assert sqnr.layout.xaxis.type == "category"
