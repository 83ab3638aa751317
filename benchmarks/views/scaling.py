"""The data-parallel benchmark's figures, from its typed records (``ScalingRun``, in
``distributed.record``): throughput, scaling efficiency and bytes on the wire per
compression, against the number of workers; each run's throughput with its 95% interval
(from its timed steps), and the notes that say which differences are noise.

A run's interval is that of its mean step time (Student t over rank 0's kept step times),
carried over to the throughput; an efficiency's interval combines its run's and its
one-worker reference's (the extremes of both), so it is conservative. Runs with one worker
move nothing between workers, whatever their compression: they should be alike, and where
they differ beyond their intervals the machine was busy, and every efficiency built on them
carries that noise.
"""

from __future__ import annotations

import plotly.graph_objects as go

from benchmarks.distributed.record import ScalingRun
from benchmarks.report.style import BASELINE_COLOR, CHART_HEIGHT

RATIO_WITHOUT_INTERVAL = 1.10  # runs with no recorded noise: a gap this large is flagged


def _by_series(runs: list[ScalingRun]) -> dict[str, list[ScalingRun]]:
    groups: dict[str, list[ScalingRun]] = {}
    for r in runs:
        if r.measured:
            groups.setdefault(r.series, []).append(r)
    for g in groups.values():
        g.sort(key=lambda r: r.workers)
    return groups


def throughput_interval(run: ScalingRun) -> tuple[float, float] | None:
    """The 95% interval of a run's throughput, from the spread of its timed steps; None
    without two step times (an older or failed run)."""
    from benchmarks.report.stats import mean_interval
    if run.throughput is None or len(run.step_ms_samples) < 2:
        return None
    m = mean_interval(list(run.step_ms_samples))
    low_ms, high_ms = m["ci"]
    # A mean step this uncertain has no upper bound on the throughput: say so as infinity.
    high = run.throughput * m["mean"] / low_ms if low_ms > 0 else float("inf")
    return run.throughput * m["mean"] / high_ms, high


def efficiency_interval(run: ScalingRun, runs: list[ScalingRun]
                        ) -> tuple[float, float] | None:
    """The interval of a run's scaling efficiency, against the one-worker run of the same
    compression and AMP setting (the launcher's reference)."""
    if run.scaling_efficiency is None:
        return None
    base = next((b for b in runs if b.workers == 1 and b.error is None
                 and b.compression == run.compression and b.amp == run.amp), None)
    mine, ref = throughput_interval(run), base and throughput_interval(base)
    if mine is None or not ref:
        return None
    n = run.workers
    return mine[0] / (n * ref[1]), mine[1] / (n * ref[0])


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _ratio(a: ScalingRun, b: ScalingRun) -> float:
    return max(a.throughput, b.throughput) / min(a.throughput, b.throughput)


def noise_warnings(runs: list[ScalingRun]) -> list[str]:
    """One line per pair of one-worker runs that should be alike (nothing crosses the wire)
    but whose throughputs differ beyond their intervals: the efficiencies built on them
    differ by that noise, not only by compression."""
    ones = [r for r in runs if r.workers == 1 and r.measured]
    lines = []
    for i, a in enumerate(ones):
        for b in ones[i + 1:]:
            if a.amp != b.amp:
                continue  # AMP changes the computation: not expected alike
            ia, ib = throughput_interval(a), throughput_interval(b)
            ratio = _ratio(a, b)
            if ia and ib:
                if _overlap(ia, ib):
                    continue
                why = (f"beyond their 95% intervals ({_span(ia)} and {_span(ib)} samples/s)")
            elif ratio >= RATIO_WITHOUT_INTERVAL:
                why = "and their step times' spread was not recorded to judge it"
            else:
                continue
            lines.append(
                f"{a.name} and {b.name} should be alike (one worker sends nothing, "
                f"whatever the compression) but their throughputs differ {ratio:.2f}x, {why}: "
                f"the machine was likely busy while they ran, so the scaling efficiencies "
                f"measured against each differ by this noise as much as by compression. Rerun "
                f"on a quiet machine before reading them as a difference.")
    return lines


def within_noise(runs: list[ScalingRun]) -> list[str]:
    """The comparisons at one worker count (more than one) whose throughput intervals
    overlap: not a difference, whatever the figures say."""
    lines = []
    by_workers: dict[int, list[ScalingRun]] = {}
    for r in runs:
        if r.measured and r.workers > 1:
            by_workers.setdefault(r.workers, []).append(r)
    for workers, group in sorted(by_workers.items()):
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                ia, ib = throughput_interval(a), throughput_interval(b)
                if ia and ib and _overlap(ia, ib):
                    lines.append(f"{a.name} vs {b.name}: {_ratio(a, b):.2f}x apart, "
                                 f"within noise (intervals {_span(ia)} and {_span(ib)} "
                                 f"samples/s overlap): not a measured difference")
    return lines


def _span(interval: tuple[float, float]) -> str:
    high = "∞" if interval[1] == float("inf") else f"{interval[1]:,.0f}"
    return f"{interval[0]:,.0f}–{high}"


def interval_text(interval: tuple[float, float] | None, percent: bool = False) -> str | None:
    """An interval as a table cell: "1,200–1,350" samples/s, or "55.00%–61.00%"."""
    if interval is None:
        return None
    if percent:
        high = "∞" if interval[1] == float("inf") else f"{100 * interval[1]:.2f}%"
        return f"{100 * interval[0]:.2f}%–{high}"
    return _span(interval)


def throughput_chart(runs: list[ScalingRun]) -> go.Figure:
    """Throughput against workers, each compression beside its ideal N x throughput(1)."""
    fig = go.Figure()
    for label, group in _by_series(runs).items():
        xs = [r.workers for r in group]
        intervals = [throughput_interval(r) or (r.throughput, r.throughput) for r in group]
        finite = all(hi != float("inf") for _, hi in intervals)
        fig.add_scatter(x=xs, y=[r.throughput for r in group], mode="lines+markers",
                        name=label, error_y=dict(  # each run's 95% interval: its noise
                            type="data", visible=finite,
                            array=[hi - r.throughput for r, (_, hi) in zip(group, intervals)]
                            if finite else None,
                            arrayminus=[r.throughput - lo
                                        for r, (lo, _) in zip(group, intervals)]))
        one = next((r for r in group if r.workers == 1), None)
        if one:
            fig.add_scatter(x=xs, y=[w * one.throughput for w in xs], mode="lines",
                            name=f"ideal ({label})", line=dict(dash="dash"), opacity=0.6)
    # A short title: three charts share the page's width, and a longer one was cut off; the
    # legend names the dashed lines ("ideal (none)").
    fig.update_layout(title="Throughput vs workers",
                      height=CHART_HEIGHT, margin=dict(l=10, r=10, t=40, b=10),
                      xaxis_title="workers", yaxis_title="samples / s", xaxis_dtick=1)
    return fig


def efficiency_chart(runs: list[ScalingRun]) -> go.Figure:
    fig = go.Figure()
    for label, group in _by_series(runs).items():
        pts = [r for r in group if r.scaling_efficiency is not None]
        fig.add_scatter(x=[r.workers for r in pts], y=[100 * r.scaling_efficiency for r in pts],
                        mode="lines+markers", name=label)
    fig.add_hline(y=100, line_dash="dash", line_color=BASELINE_COLOR)
    fig.update_layout(title="Scaling efficiency", height=CHART_HEIGHT,
                      margin=dict(l=10, r=10, t=40, b=10), xaxis_title="workers",
                      yaxis_title="% of ideal", xaxis_dtick=1)
    return fig


def bytes_chart(runs: list[ScalingRun]) -> go.Figure:
    fig = go.Figure()
    for label, group in _by_series(runs).items():
        pts = [r for r in group if r.bytes_per_step is not None]
        fig.add_bar(x=[str(r.workers) for r in pts], y=[r.bytes_per_step / 1e6 for r in pts],
                    name=label)
    fig.update_layout(title="Bytes communicated per step", height=CHART_HEIGHT,
                      margin=dict(l=10, r=10, t=40, b=10), xaxis_title="workers",
                      yaxis_title="MB / step", barmode="group")
    return fig
