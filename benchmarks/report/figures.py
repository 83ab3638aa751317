"""Plotly figures built from the engine's comparison rows (``benchmarks.report.results``).

Figures only: no Streamlit, no torch, so the dashboard (``dashboard/charts.py`` re-exports
these modules), the HTML report and a notebook share one copy. Rows are the dicts of
``RunReport.rows()``; the baseline is the row marked ``is_baseline``. ``run_figures`` is every
chart of one run, in reading order: what the Results page draws and the report holds.

Legible at 30 variants: bars are horizontal with short labels (the full name on hover),
accuracy sits on an axis fitted to the data with its 95% interval drawn, differences within
noise are drawn pale, the Pareto chart labels only its frontier, and every swept setting gets
curves of accuracy, latency and size against its values. The roofline sets each variant's
achieved FLOP/s against the device's measured roofs.
"""

from __future__ import annotations

import plotly.graph_objects as go

from benchmarks.report.scaling import bytes_chart, efficiency_chart, throughput_chart  # noqa: F401
from benchmarks.report.seeds import seeds_shown

# The names the dashboard's charts use (``dashboard/charts.py`` re-exports this module).
from benchmarks.report.style import (  # noqa: F401
    BASELINE_COLOR,
    CHART_HEIGHT,
    NOISY_COLOR,
    PLOTLY_CONFIG,
    SHORT_LABEL,
    VARIANT_COLOR,
    axis_labels,
    bar_colors,
    is_baseline,
    layout,
    mark_baseline,
    num,
    ok_rows,
    short,
)
from benchmarks.report.tradeoffs import (  # noqa: F401
    curve_chart,
    pareto_chart,
    pareto_front_of,
    roofline_chart,
    roofline_points,
    swept_axes,
    throughput_text,
)


def accuracy_chart(rows: list[dict]) -> go.Figure:
    """Accuracy with its 95% interval, on an axis fitted to the data: a 2-point loss shows.
    Pale bars: the change against the baseline is within noise (paired test). Rows shown
    over seeds (``RunReport.shown_rows``) draw the mean with its t interval, and say so."""
    seeds = seeds_shown(rows)
    rows = [r for r in ok_rows(rows) if num(r.get("accuracy")) is not None]
    acc = [100 * r["accuracy"] for r in rows]
    low = [100 * (num(r.get("accuracy_ci_low")) or r["accuracy"]) for r in rows]
    high = [100 * (num(r.get("accuracy_ci_high")) or r["accuracy"]) for r in rows]
    fig = go.Figure(go.Bar(
        y=axis_labels(rows), x=acc, orientation="h", marker_color=bar_colors(rows),
        error_x=dict(type="data", symmetric=False, array=[h - a for h, a in zip(high, acc)],
                     arrayminus=[a - lo for a, lo in zip(acc, low)], color="#374151",
                     thickness=1.2, width=4),
        text=[f"{a:.1f}" for a in acc], textposition="inside", insidetextanchor="end",
        customdata=[[r["variant"], lo, h, _noise_text(r)] for r, lo, h in zip(rows, low, high)],
        hovertemplate="%{customdata[0]}<br>%{x:.2f}%" + (f" (mean of {seeds} seeds)"
                                                        if seeds else "") +
                      " (95% CI %{customdata[1]:.1f}-%{customdata[2]:.1f})<br>"
                      "%{customdata[3]}<extra></extra>"))
    if acc:
        span = max(high) - min(low)
        pad = max(0.5, 0.1 * span)
        fig.update_xaxes(range=[max(0.0, min(low) - pad), min(100.0, max(high) + pad)])
    mark_baseline(fig, rows, "accuracy", 100.0)
    title = (f"Accuracy, mean of {seeds} seeds (95% t interval; pale: within noise, "
             f"paired t-test over seeds)" if seeds else
             "Accuracy (95% interval; pale: within noise)")
    return layout(fig, title, "%", len(rows))


def _noise_text(row: dict) -> str:
    if is_baseline(row):
        return "baseline"
    p = row.get("p_value_vs_base")
    if p is None:
        return "no paired test"
    test = "paired t over seeds" if str(row.get("accuracy_shows", "")).startswith("mean") \
        else "exact McNemar"
    return f"p = {p:.3g} vs baseline ({test}): " + ("within noise" if row.get("within_noise")
                                                    else "a real difference")


def latency_chart(rows: list[dict]) -> go.Figure:
    """p50 bars with whiskers up to p90 (thick) and p99 (thin); noisy latencies in amber
    and marked with a '!'."""
    rows = [r for r in ok_rows(rows) if num(r.get("p50_ms")) is not None]
    labels = axis_labels(rows)
    p50 = [r["p50_ms"] for r in rows]
    p90 = [max(0.0, (num(r.get("p90_ms")) or r["p50_ms"]) - r["p50_ms"]) for r in rows]
    p99 = [max(0.0, (num(r.get("p99_ms")) or r["p50_ms"]) - r["p50_ms"]) for r in rows]
    colors = [NOISY_COLOR if r.get("noisy") else
              (BASELINE_COLOR if is_baseline(r) else VARIANT_COLOR) for r in rows]
    text = ["noisy!" if r.get("noisy") else ("launch-bound" if r.get("launch_bound") else "")
            for r in rows]
    fig = go.Figure()
    fig.add_bar(y=labels, x=p50, orientation="h", marker_color=colors, name="p50", text=text,
                textposition="outside", cliponaxis=False,
                error_x=dict(type="data", symmetric=False, array=p99, arrayminus=[0] * len(p99),
                             thickness=1, width=6, color="#374151"),
                customdata=[[r["variant"], r.get("p90_ms"), r.get("p99_ms"), r.get("noisy"),
                             r.get("device"), r.get("timing"), throughput_text(r)]
                            for r in rows],
                hovertemplate="%{customdata[0]} (%{customdata[4]})<br>p50 %{x:.3f} ms<br>p90 "
                              "%{customdata[1]:.3f} ms<br>p99 %{customdata[2]:.3f} ms<br>"
                              "noisy: %{customdata[3]}; timed %{customdata[5]}<br>"
                              "%{customdata[6]}<extra></extra>")
    # p90 whisker drawn as an invisible bar's error bar so both tails show on one bar.
    fig.add_bar(y=labels, x=p50, orientation="h", marker_color="rgba(0,0,0,0)",
                hoverinfo="skip", name="p90",
                error_x=dict(type="data", symmetric=False, array=p90, arrayminus=[0] * len(p90),
                             thickness=3, width=0, color="#111827"))
    fig.update_layout(barmode="overlay")
    mark_baseline(fig, rows, "p50_ms")
    # A disturbed run can have p99 tails many times the median; a log axis keeps the p50 bars
    # readable without hiding the tails.
    top = max((p + t for p, t in zip(p50, p99)), default=0.0)
    log = bool(p50) and top > 4 * max(p50)
    if log:
        fig.update_xaxes(type="log")
    return layout(fig, "Latency p50 (whiskers p90 / p99)" + (", log" if log else ""),
                   "ms per batch", len(rows))


def memory_chart(rows: list[dict]) -> go.Figure:
    rows = [r for r in ok_rows(rows) if num(r.get("peak_memory_mb")) is not None]
    fig = go.Figure(go.Bar(y=axis_labels(rows), x=[r["peak_memory_mb"] for r in rows],
                           orientation="h",
                           marker_color=[BASELINE_COLOR if is_baseline(r) else VARIANT_COLOR
                                         for r in rows],
                           customdata=[[r["variant"], r.get("memory_method")] for r in rows],
                           hovertemplate="%{customdata[0]}: %{x:.2f} MB (%{customdata[1]})"
                                         "<extra></extra>"))
    mark_baseline(fig, rows, "peak_memory_mb")
    return layout(fig, "Peak memory", "MB", len(rows))


def size_chart(rows: list[dict]) -> go.Figure:
    rows = [r for r in ok_rows(rows) if num(r.get("size_mb")) is not None]
    labels = axis_labels(rows)
    names = [r["variant"] for r in rows]
    fig = go.Figure()
    fig.add_bar(y=labels, x=[r["size_mb"] for r in rows], name="raw", orientation="h",
                marker_color=VARIANT_COLOR, customdata=names,
                hovertemplate="%{customdata}: %{x:.3f} MB raw<extra></extra>")
    fig.add_bar(y=labels, x=[r.get("size_gzip_mb") for r in rows], name="gzipped",
                orientation="h", marker_color="#93c5fd", customdata=names,
                hovertemplate="%{customdata}: %{x:.3f} MB gzipped<extra></extra>")
    fig.update_layout(barmode="group")
    mark_baseline(fig, rows, "size_mb")
    fig = layout(fig, "Size (raw and gzipped)", "MB", int(1.5 * len(rows)))
    fig.update_layout(showlegend=True, legend=dict(orientation="h", y=1.02, x=1,
                                                    xanchor="right", yanchor="bottom"))
    return fig


def sparsity_chart(per_variant: dict[str, dict[str, float]]) -> go.Figure:
    """Per-layer sparsity of every pruned variant in one heatmap (layers down, variants
    across): one figure however many variants, so a large sweep still draws at once."""
    variants = list(per_variant)
    layers = list(dict.fromkeys(k for v in per_variant.values() for k in v))
    z = [[None if per_variant[v].get(layer) is None else 100 * per_variant[v][layer]
          for v in variants] for layer in layers]
    fig = go.Figure(go.Heatmap(z=z, x=[short(v) for v in variants], y=layers, zmin=0,
                               zmax=100, colorscale="Blues", colorbar=dict(title="zeros %"),
                               customdata=[[v for v in variants] for _ in layers],
                               hovertemplate="%{customdata}<br>%{y}: %{z:.1f}% zeros"
                                             "<extra></extra>"))
    fig.update_layout(title="Per-layer sparsity of pruned variants",
                      height=max(240, 80 + 24 * len(layers)),
                      margin=dict(l=10, r=10, t=40, b=10), yaxis_autorange="reversed")
    fig.update_xaxes(tickangle=-30)
    return fig


# -- every chart of a run ------------------------------------------------------------------------

FOUR = ("accuracy", "latency", "memory", "size")


def run_figures(report, rows: list[dict] | None = None) -> dict[str, go.Figure]:
    """Every chart of one sweep (a ``RunReport``), in reading order, by name: the four figures
    side by side, a trade-off curve per swept setting (``curve:<axis>``), Pareto, the roofline
    (where the device's peaks were measured), per-layer sparsity of pruned variants. The
    Results page draws them and the HTML report holds them: one list, so the two agree."""
    rows = report.shown_rows() if rows is None else rows
    figs: dict[str, go.Figure] = {}
    if not ok_rows(rows):
        return figs
    # With deployment axes, these charts show each variant's own row (eager, the first batch
    # size and thread count); its runtime cells are drawn by report/runtimes.py.
    primary = [r for r in rows if r.get("runtime_variant", r["variant"]) == r["variant"]]
    rows = primary if ok_rows(primary) else rows
    figs.update(accuracy=accuracy_chart(rows), latency=latency_chart(rows),
                memory=memory_chart(rows), size=size_chart(rows))
    for axis in swept_axes(rows):
        figs[f"curve:{axis}"] = curve_chart(rows, axis)
    front = pareto_front_of(rows)
    if front:
        figs["pareto"] = pareto_chart(rows, front)
    if report.peaks and roofline_points(rows):
        figs["roofline"] = roofline_chart(rows, report.peaks)
    # Any variant that recorded per-layer sparsity, whichever technique made it.
    sparse = {v.name: v.layer_sparsity for v in report.variants if v.layer_sparsity
              and (v.runtime or {}).get("variant", v.name) == v.name}
    if sparse:
        figs["sparsity"] = sparsity_chart(sparse)
    return figs
