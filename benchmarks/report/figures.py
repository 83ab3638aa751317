"""Plotly figures built from the engine's comparison rows (``benchmarks.report.results``).

Figures only: no Streamlit, no torch, so the dashboard (``dashboard/charts.py`` re-exports
these modules), the HTML report and a notebook share one copy. Rows are the dicts of
``RunReport.rows()``; the baseline is the row marked ``is_baseline``. ``run_figures`` is every
chart of one run, in reading order: what the Results page draws and the report holds.

Legible at 30 variants: short labels on the axes (the full name on hover); accuracy is a dot
with its 95% interval on an axis fitted to the data (never a bar from a truncated axis), its
marker saying whether the change is a finding; a noisy latency is hatched; what a marker or
a pattern means is in the legend, never in text on the chart; the Pareto chart labels only
its frontier, and every swept setting gets
curves of accuracy, latency and size against its values. The roofline sets each variant's
achieved FLOP/s against the device's measured roofs.
"""

from __future__ import annotations

import plotly.graph_objects as go

from benchmarks.report.seeds import seeds_shown

# The names the dashboard's charts use (``dashboard/charts.py`` re-exports this module).
from benchmarks.report.style import (  # noqa: F401
    BASELINE_COLOR,
    CHART_HEIGHT,
    INK,
    NOISY_COLOR,
    PLOTLY_CONFIG,
    SHORT_LABEL,
    VARIANT_COLOR,
    axis_labels,
    bar_colors,
    is_baseline,
    keep_order,
    layout,
    log_ticks,
    mark_baseline,
    num,
    ok_rows,
    short,
    with_legend,
)
from benchmarks.report.tradeoffs import (  # noqa: F401
    curve_axes,
    curve_chart,
    pareto_chart,
    pareto_front_of,
    swept_axes,
    throughput_text,
)
from benchmarks.report.roofline_chart import (  # noqa: F401
    roofline_chart,
    roofline_points,
)


# How a variant's accuracy change reads against the baseline: a marker each, explained in the
# legend (no text on the chart to pile up at 30 variants).
ACCURACY_GROUPS = (
    ("baseline", dict(symbol="diamond", color=BASELINE_COLOR, size=11)),
    ("differs from the baseline (paired test, p < 0.05)",
     dict(symbol="circle", color=VARIANT_COLOR, size=10)),
    ("within noise (p >= 0.05): not a finding",
     dict(symbol="circle-open", color=VARIANT_COLOR, size=10, line=dict(width=2))),
    ("no paired test", dict(symbol="square-open", color=BASELINE_COLOR, size=9,
                            line=dict(width=2))),
)


def _accuracy_group(row: dict) -> str:
    if is_baseline(row):
        return ACCURACY_GROUPS[0][0]
    if row.get("p_value_vs_base") is None:
        return ACCURACY_GROUPS[3][0]
    return ACCURACY_GROUPS[2][0] if row.get("within_noise") else ACCURACY_GROUPS[1][0]


def accuracy_chart(rows: list[dict]) -> go.Figure:
    """Accuracy as a dot with its 95% interval, on an axis fitted to the data: a 2-point loss
    shows, and no bar length exaggerates it (dots carry no length). The marker says whether
    the change against the baseline is a finding (the paired test); the legend says how. Rows
    shown over seeds (``RunReport.shown_rows``) draw the mean with its t interval, and say so."""
    seeds = seeds_shown(rows)
    rows = [r for r in ok_rows(rows) if num(r.get("accuracy")) is not None]
    labels = axis_labels(rows)
    acc = [100 * r["accuracy"] for r in rows]
    low = [100 * (num(r.get("accuracy_ci_low")) or r["accuracy"]) for r in rows]
    high = [100 * (num(r.get("accuracy_ci_high")) or r["accuracy"]) for r in rows]
    fig = go.Figure()
    for group, marker in ACCURACY_GROUPS:
        idx = [i for i, r in enumerate(rows) if _accuracy_group(r) == group]
        if not idx:
            continue
        fig.add_scatter(
            y=[labels[i] for i in idx], x=[acc[i] for i in idx], mode="markers", name=group,
            marker=marker,
            error_x=dict(type="data", symmetric=False, array=[high[i] - acc[i] for i in idx],
                         arrayminus=[acc[i] - low[i] for i in idx], color=INK, thickness=1.5,
                         width=4),
            customdata=[[rows[i]["variant"], low[i], high[i], _noise_text(rows[i])]
                        for i in idx],
            hovertemplate="%{customdata[0]}<br>%{x:.2f}%" + (f" (mean of {seeds} seeds)"
                                                            if seeds else "") +
                          " (95% CI %{customdata[1]:.1f}-%{customdata[2]:.1f})<br>"
                          "%{customdata[3]}<extra></extra>")
    if acc:
        span = max(high) - min(low)
        pad = max(0.5, 0.1 * span)
        fig.update_xaxes(range=[max(0.0, min(low) - pad), min(100.0, max(high) + pad)])
    mark_baseline(fig, rows, "accuracy", 100.0)
    title = (f"Accuracy, mean of {seeds} seeds, with its 95% t interval" if seeds else
             "Accuracy with its 95% interval")
    fig = layout(fig, title, "% of the test split", len(rows))
    keep_order(fig, labels)
    return with_legend(fig)


def _noise_text(row: dict) -> str:
    if is_baseline(row):
        return "baseline"
    p = row.get("p_value_vs_base")
    if p is None:
        return "no paired test"
    # The test the row's interval and p-value both come from (older rows: the paired test).
    test = "paired t over seeds" if str(row.get("accuracy_shows", "")).startswith("mean") \
        else (row.get("test_vs_base") or "paired test")
    return f"p = {p:.3g} vs baseline ({test}): " + ("within noise" if row.get("within_noise")
                                                    else "a real difference")


# A latency bar's pattern says what to doubt about it; the legend says why.
LATENCY_GROUPS = (
    ("baseline", dict(color=BASELINE_COLOR)),
    ("variant", dict(color=VARIANT_COLOR)),
    ("noisy: IQR above 10% of the median, rerun before trusting small differences",
     dict(color=NOISY_COLOR, pattern=dict(shape="/", solidity=0.45))),
    ("launch-bound: the GPU waits on the host issuing calls",
     dict(color=VARIANT_COLOR, pattern=dict(shape=".", solidity=0.5))),
)


def _latency_group(row: dict) -> str:
    if row.get("noisy"):
        return LATENCY_GROUPS[2][0]
    if row.get("launch_bound"):
        return LATENCY_GROUPS[3][0]
    return LATENCY_GROUPS[0][0] if is_baseline(row) else LATENCY_GROUPS[1][0]


def latency_chart(rows: list[dict]) -> go.Figure:
    """p50 bars from zero with whiskers up to p90 (thick) and p99 (thin); a noisy or
    launch-bound latency hatched, explained in the legend."""
    rows = [r for r in ok_rows(rows) if num(r.get("p50_ms")) is not None]
    labels = axis_labels(rows)
    p50 = [r["p50_ms"] for r in rows]
    p90 = [max(0.0, (num(r.get("p90_ms")) or r["p50_ms"]) - r["p50_ms"]) for r in rows]
    p99 = [max(0.0, (num(r.get("p99_ms")) or r["p50_ms"]) - r["p50_ms"]) for r in rows]
    fig = go.Figure()
    for group, marker in LATENCY_GROUPS:
        idx = [i for i, r in enumerate(rows) if _latency_group(r) == group]
        if not idx:
            continue
        fig.add_bar(
            y=[labels[i] for i in idx], x=[p50[i] for i in idx], orientation="h", name=group,
            marker=marker, showlegend=group not in ("baseline", "variant"),
            error_x=dict(type="data", symmetric=False, array=[p99[i] for i in idx],
                         arrayminus=[0] * len(idx), thickness=1, width=6, color=INK),
            customdata=[[rows[i]["variant"], rows[i].get("p90_ms"), rows[i].get("p99_ms"),
                         rows[i].get("noisy"), rows[i].get("device"), rows[i].get("timing"),
                         throughput_text(rows[i])] for i in idx],
            hovertemplate="%{customdata[0]} (%{customdata[4]})<br>p50 %{x:.3f} ms<br>p90 "
                          "%{customdata[1]:.3f} ms<br>p99 %{customdata[2]:.3f} ms<br>"
                          "noisy: %{customdata[3]}; timed %{customdata[5]}<br>"
                          "%{customdata[6]}<extra></extra>")
    # The p90 whisker: an invisible point's thicker error bar, so both tails show on a bar.
    fig.add_scatter(y=labels, x=p50, mode="markers", marker=dict(size=1, opacity=0),
                    hoverinfo="skip", showlegend=False, name="p90",
                    error_x=dict(type="data", symmetric=False, array=p90,
                                 arrayminus=[0] * len(p90), thickness=3, width=0, color=INK))
    fig.update_layout(barmode="overlay")
    mark_baseline(fig, rows, "p50_ms")
    # A disturbed run can have p99 tails many times the median; a log axis keeps the p50 bars
    # readable without hiding the tails.
    top = max((p + t for p, t in zip(p50, p99)), default=0.0)
    log = bool(p50) and top > 4 * max(p50)
    if log:
        low = min((p for p in p50 if p > 0), default=0.0)
        fig.update_xaxes(**log_ticks(low, top))
    fig = layout(fig, "Latency p50 (whiskers p90 / p99)" + (", log" if log else ""),
                 "ms per batch", len(rows))
    keep_order(fig, labels)
    if any(_latency_group(r) not in ("baseline", "variant") for r in rows):
        with_legend(fig)
    return fig


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
    # Layers and variants as categories, whatever their names look like ("0", "2", "5").
    fig.update_xaxes(type="category")
    fig.update_yaxes(type="category", automargin=True)
    fig.update_xaxes(tickangle=-30)
    return fig


def layer_chart(name: str, sparsity: dict[str, float]) -> go.Figure:
    """One variant's per-layer sparsity: a bar per layer from zero (what the selected
    variant's details show)."""
    layers = list(sparsity)
    fig = go.Figure(go.Bar(y=layers, x=[100 * sparsity[k] for k in layers], orientation="h",
                           marker_color=VARIANT_COLOR, customdata=[name] * len(layers),
                           hovertemplate="%{customdata}<br>%{y}: %{x:.1f}% zeros"
                                         "<extra></extra>"))
    fig.update_xaxes(range=[0, 100])
    return layout(fig, f"Zeros per layer: {short(name, 40)}", "% of the layer's weights",
                  len(layers))


# -- every chart of a run ------------------------------------------------------------------------

FOUR = ("accuracy", "latency", "memory", "size")


def sparse_layers(report) -> dict:
    """Per-layer sparsity of every variant that recorded it, whichever technique made it (a
    runtime cell shares its variant's)."""
    return {v.name: v.cost.layer_sparsity for v in report.variants if v.cost.layer_sparsity
            and (v.runtime or {}).get("variant", v.name) == v.name}


def primary_rows(rows: list[dict]) -> list[dict]:
    """With deployment axes, each variant's own row (eager, the first batch size and thread
    count): these charts show it; its runtime cells are drawn by report/runtimes.py."""
    primary = [r for r in rows if r.get("runtime_variant", r["variant"]) == r["variant"]]
    return primary if ok_rows(primary) else rows


def figure_names(report, rows: list[dict]) -> list[str]:
    """The names ``run_figures`` would give, in its order, without building a figure (what a
    page needs to lay out its tabs before drawing only the open one)."""
    rows = primary_rows(rows)
    if not ok_rows(rows):
        return []
    names = [*FOUR, *(f"curve:{axis}" for axis in curve_axes(rows))]
    if pareto_front_of(rows):
        names.append("pareto")
    if report.peaks and roofline_points(rows):
        names.append("roofline")
    if sparse_layers(report):
        names.append("sparsity")
    return names


def run_figures(report, rows: list[dict] | None = None,
                only: set[str] | None = None) -> dict[str, go.Figure]:
    """Every chart of one sweep (a ``RunReport``), in reading order, by name: the four figures
    side by side, a trade-off curve per swept setting (``curve:<axis>``), Pareto, the roofline
    (where the device's peaks were measured), per-layer sparsity of pruned variants. The
    Results page draws them and the HTML report holds them: one list, so the two agree.
    ``only``: just those names (a page draws one tab at a time)."""
    rows = primary_rows(report.shown_rows() if rows is None else rows)
    wanted = figure_names(report, rows)
    if only is not None:
        wanted = [name for name in wanted if name in only]
    figs: dict[str, go.Figure] = {}
    for name in wanted:
        if name in FOUR:
            figs[name] = {"accuracy": accuracy_chart, "latency": latency_chart,
                          "memory": memory_chart, "size": size_chart}[name](rows)
        elif name.startswith("curve:"):
            figs[name] = curve_chart(rows, name[len("curve:"):])
        elif name == "pareto":
            figs[name] = pareto_chart(rows, pareto_front_of(rows))
        elif name == "roofline":
            figs[name] = roofline_chart(rows, report.peaks)
        else:  # per-layer sparsity, whichever technique recorded it
            figs[name] = sparsity_chart(sparse_layers(report))
    return figs
