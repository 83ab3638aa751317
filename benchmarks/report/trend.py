"""A model's history as a trend: for one model and data set, the accuracy and p50 of the
baseline and of every variant across runs over time, with the commit and the machine of each
run, and a flag where a change from the variant's previous run is bigger than its noise.

Accuracy: the paired test on the same test examples (``stats.paired_difference``; both runs
scored the same split: the same count of examples, the bits of each), flagged at p < 0.05. Latency: each run's 95%
interval of its p50 (a t interval over its interleaved timing rounds' medians, or with fewer
than three rounds the order-statistic interval of the median of its samples), flagged where
the two intervals do not overlap, and only between runs on the same machine: another machine's
timings say nothing about this one's. Figures only: no Streamlit, no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import plotly.graph_objects as go

from benchmarks.report import stats
from benchmarks.report.results import VariantResult
from benchmarks.report.style import (
    BASELINE_COLOR,
    CHART_HEIGHT,
    FAILED_COLOR,
    INK,
    PALETTE,
    short,
    with_legend,
)

MIN_ROUNDS = 3   # fewer timing rounds than this: the interval comes from the samples
Z95 = 1.959964


@dataclass
class Point:
    """One variant in one run."""

    variant: str
    run_id: str
    created_at: str
    commit: str | None
    machine: str
    accuracy: float | None
    p50_ms: float | None
    p50_ci: tuple[float, float] | None
    flags: list[str] = field(default_factory=list)


def machine_of(environment: dict) -> str:
    """Which machine a run timed on: its host where recorded (the environment card, else the
    device peaks' card), else its CPU and device as the card names them."""
    env = environment or {}
    host = env.get("host") or next((p.get("host") for p in (env.get("peaks") or {}).values()
                                    if isinstance(p, dict) and p.get("host")), None)
    if host:
        return str(host)
    return " · ".join(str(env[k]) for k in ("cpu", "device_name") if env.get(k)) or "unknown"


def p50_interval(result: VariantResult) -> tuple[float, float] | None:
    """A 95% interval of the variant's p50 (see the module's docstring); None untimed."""
    rounds = [r for r in result.timing.round_p50_ms if r is not None]
    if len(rounds) >= MIN_ROUNDS:
        ci = (stats.mean_interval(rounds) or {}).get("ci")
        return (ci[0], ci[1]) if ci else None
    samples = sorted(result.timing.latency_samples_ms)
    n = len(samples)
    if n < 10:
        return None
    # The ranks between which the median lies with 95% confidence (binomial, normal approx.)
    half = Z95 * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half) - 1)
    high = min(n - 1, math.ceil(n / 2 + half))
    return samples[low], samples[high]


def _accuracy_flag(before: VariantResult, after: VariantResult) -> str | None:
    was, now = before.scores, after.scores
    if not (was.correct_bits and now.correct_bits and was.n_test == now.n_test and was.n_test):
        return None
    # The paired test every table uses (its interval would agree with this p).
    p = stats.paired_bits(now.correct_bits, was.correct_bits, now.n_test)["p_value"]
    if p >= stats.ALPHA:
        return None
    change = 100 * ((after.scores.accuracy or 0) - (before.scores.accuracy or 0))
    return f"accuracy {'up' if change > 0 else 'down'} {abs(change):.2f} pts (p = {p:.3g})"


def _latency_flag(before: Point, after: Point) -> str | None:
    if before.machine != after.machine or not (before.p50_ci and after.p50_ci):
        return None
    if after.p50_ci[0] > before.p50_ci[1]:
        word = "slower"
    elif after.p50_ci[1] < before.p50_ci[0]:
        word = "faster"
    else:
        return None
    return f"p50 {word}: {after.p50_ms:.3f} ms against {before.p50_ms:.3f} ms (95% intervals " \
           f"apart, same machine)"


def trend(runs: list[dict]) -> list[Point]:
    """Every variant of ``runs`` (stored sweeps of one model and data set, any order) as a
    point, oldest run first, each flagged against the same variant's previous run."""
    ordered = sorted(runs, key=lambda r: (r.get("created_at") or "", r.get("run_id") or ""))
    points: list[Point] = []
    last: dict[str, tuple[Point, VariantResult]] = {}
    for run in ordered:
        env = run.get("environment") or {}
        for stored in run.get("variants") or []:
            result = VariantResult.from_dict(stored)
            if not result.ok:
                continue
            latency = result.timing.latency
            point = Point(result.name, run.get("run_id") or "", run.get("created_at") or "",
                          env.get("git_commit"), machine_of(env), result.scores.accuracy,
                          None if latency is None else latency.p50, p50_interval(result))
            if result.name in last:
                before, before_result = last[result.name]
                point.flags = [f for f in (_accuracy_flag(before_result, result),
                                           _latency_flag(before, point)) if f]
            last[result.name] = (point, result)
            points.append(point)
    return points


def trend_figure(points: list[Point]) -> go.Figure:
    """Accuracy and p50 against the run's date, a line per variant (the baseline in grey),
    each point's commit and machine on hover, a flagged change ringed in red."""
    from plotly.subplots import make_subplots
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1,
                        subplot_titles=("accuracy (%)", "p50 (ms per batch, 95% interval)"))
    names = list(dict.fromkeys(p.variant for p in points))
    for n, name in enumerate(names):
        mine = [p for p in points if p.variant == name]
        color = BASELINE_COLOR if name == "baseline" else PALETTE[n % len(PALETTE)]
        hover = [[p.variant, p.commit or "?", p.machine, "; ".join(p.flags) or "no flag"]
                 for p in mine]
        template = ("%{customdata[0]}<br>%{x}<br>%{y:.3f}<br>commit %{customdata[1]} on "
                    "%{customdata[2]}<br>%{customdata[3]}<extra></extra>")
        accurate = [p for p in mine if p.accuracy is not None]
        fig.add_scatter(x=[p.created_at for p in accurate],
                        y=[100 * p.accuracy for p in accurate], mode="lines+markers",
                        name=short(name), legendgroup=name, line=dict(color=color),
                        customdata=[hover[mine.index(p)] for p in accurate],
                        hovertemplate=template, row=1, col=1)
        timed = [p for p in mine if p.p50_ms is not None]
        fig.add_scatter(
            x=[p.created_at for p in timed], y=[p.p50_ms for p in timed], mode="lines+markers",
            name=short(name), legendgroup=name, showlegend=False, line=dict(color=color),
            error_y=dict(type="data", symmetric=False, color=INK, thickness=1, width=3,
                         array=[(p.p50_ci[1] - p.p50_ms) if p.p50_ci else 0 for p in timed],
                         arrayminus=[(p.p50_ms - p.p50_ci[0]) if p.p50_ci else 0
                                     for p in timed]),
            customdata=[hover[mine.index(p)] for p in timed], hovertemplate=template,
            row=2, col=1)
    flagged = [p for p in points if p.flags]
    for row, value in ((1, lambda p: None if p.accuracy is None else 100 * p.accuracy),
                       (2, lambda p: p.p50_ms)):
        marks = [p for p in flagged if value(p) is not None and any(
            ("accuracy" in f) == (row == 1) for f in p.flags)]
        fig.add_scatter(x=[p.created_at for p in marks], y=[value(p) for p in marks],
                        mode="markers", name="change beyond its noise (hover for why)",
                        legendgroup="flag", showlegend=row == 1 and bool(flagged),
                        marker=dict(symbol="circle-open", size=18,
                                    line=dict(width=3, color=FAILED_COLOR)),
                        customdata=[[p.variant, "; ".join(p.flags)] for p in marks],
                        hovertemplate="%{customdata[0]}: %{customdata[1]}<extra></extra>",
                        row=row, col=1)
    fig.update_layout(title="Trend across runs", height=CHART_HEIGHT * 2,
                      margin=dict(l=10, r=10, t=60, b=10))
    return with_legend(fig)
