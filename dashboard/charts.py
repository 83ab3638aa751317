"""Plotly figures built from the engine's comparison rows (``benchmarks.results``).

Figures only: no Streamlit here, so a notebook can use them too. Rows are the dicts of
``comparison_rows``; the baseline is the first row without techniques.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

BASELINE_COLOR = "#6b7280"
VARIANT_COLOR = "#2563eb"
NOISY_COLOR = "#f59e0b"
FAILED_COLOR = "#dc2626"
CHART_HEIGHT = 320

# Passed to st.plotly_chart(config=...): the modebar's camera button saves a PNG, rendered by
# the browser (the server has no renderer to do it).
PLOTLY_CONFIG = {
    "displaylogo": False,
    "toImageButtonOptions": {"format": "png", "filename": "compression-benchmark",
                             "scale": 2},
}


def _num(value) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def is_baseline(row: dict) -> bool:
    return row.get("techniques") in ("-", "", None)


def ok_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if not r.get("error")]


def _layout(fig: go.Figure, title: str, yaxis: str) -> go.Figure:
    fig.update_layout(title=title, height=CHART_HEIGHT, margin=dict(l=10, r=10, t=40, b=10),
                      yaxis_title=yaxis, showlegend=False, bargap=0.25)
    fig.update_xaxes(tickangle=-30)
    return fig


def _colors(rows: list[dict]) -> list[str]:
    return [BASELINE_COLOR if is_baseline(r) else VARIANT_COLOR for r in rows]


def _mark_baseline(fig: go.Figure, rows: list[dict], key: str) -> None:
    """A dashed line at the baseline's value, so every bar reads against it."""
    base = next((r for r in rows if is_baseline(r)), None)
    value = _num(base.get(key)) if base else None
    if value is not None:
        fig.add_hline(y=value, line_dash="dash", line_color=BASELINE_COLOR,
                      annotation_text="baseline", annotation_position="top left")


def accuracy_chart(rows: list[dict]) -> go.Figure:
    rows = ok_rows(rows)
    y = [None if _num(r.get("accuracy")) is None else 100 * r["accuracy"] for r in rows]
    fig = go.Figure(go.Bar(x=[r["variant"] for r in rows], y=y, marker_color=_colors(rows),
                           text=[None if v is None else f"{v:.1f}" for v in y],
                           textposition="outside", cliponaxis=False,
                           hovertemplate="%{x}: %{y:.2f}%<extra></extra>"))
    base = next((r for r in rows if is_baseline(r)), None)
    if base and _num(base.get("accuracy")) is not None:
        fig.add_hline(y=100 * base["accuracy"], line_dash="dash", line_color=BASELINE_COLOR,
                      annotation_text="baseline", annotation_position="top left")
    fig.update_yaxes(range=[0, 105])
    return _layout(fig, "Accuracy", "%")


def latency_chart(rows: list[dict]) -> go.Figure:
    """p50 bars with whiskers up to p90 (thick) and p99 (thin); noisy latencies in amber
    and marked with a '!'."""
    rows = [r for r in ok_rows(rows) if _num(r.get("p50_ms")) is not None]
    names = [r["variant"] for r in rows]
    p50 = [r["p50_ms"] for r in rows]
    p90 = [max(0.0, (_num(r.get("p90_ms")) or r["p50_ms"]) - r["p50_ms"]) for r in rows]
    p99 = [max(0.0, (_num(r.get("p99_ms")) or r["p50_ms"]) - r["p50_ms"]) for r in rows]
    colors = [NOISY_COLOR if r.get("noisy") else c for r, c in zip(rows, _colors(rows))]
    text = ["noisy!" if r.get("noisy") else "" for r in rows]
    fig = go.Figure()
    fig.add_bar(x=names, y=p50, marker_color=colors, name="p50", text=text,
                textposition="outside", cliponaxis=False,
                error_y=dict(type="data", symmetric=False, array=p99, arrayminus=[0] * len(p99),
                             thickness=1, width=6, color="#374151"),
                customdata=[[r.get("p90_ms"), r.get("p99_ms"), r.get("noisy")] for r in rows],
                hovertemplate="%{x}<br>p50 %{y:.3f} ms<br>p90 %{customdata[0]:.3f} ms"
                              "<br>p99 %{customdata[1]:.3f} ms<br>noisy: %{customdata[2]}"
                              "<extra></extra>")
    # p90 whisker drawn as an invisible bar's error bar so both tails show on one bar.
    fig.add_bar(x=names, y=p50, marker_color="rgba(0,0,0,0)", hoverinfo="skip", name="p90",
                error_y=dict(type="data", symmetric=False, array=p90, arrayminus=[0] * len(p90),
                             thickness=3, width=0, color="#111827"))
    fig.update_layout(barmode="overlay")
    _mark_baseline(fig, rows, "p50_ms")
    # A disturbed run can have p99 tails many times the median; a log axis keeps the p50 bars
    # readable without hiding the tails.
    top = max((p + t for p, t in zip(p50, p99)), default=0.0)
    log = bool(p50) and top > 4 * max(p50)
    if log:
        fig.update_yaxes(type="log")
    return _layout(fig, "Latency p50 (whiskers p90 / p99)" + (", log" if log else ""),
                   "ms per batch")


def memory_chart(rows: list[dict]) -> go.Figure:
    rows = [r for r in ok_rows(rows) if _num(r.get("peak_memory_mb")) is not None]
    fig = go.Figure(go.Bar(x=[r["variant"] for r in rows],
                           y=[r["peak_memory_mb"] for r in rows], marker_color=_colors(rows),
                           customdata=[r.get("memory_method") for r in rows],
                           hovertemplate="%{x}: %{y:.2f} MB (%{customdata})<extra></extra>"))
    _mark_baseline(fig, rows, "peak_memory_mb")
    return _layout(fig, "Peak memory", "MB")


def size_chart(rows: list[dict]) -> go.Figure:
    rows = [r for r in ok_rows(rows) if _num(r.get("size_mb")) is not None]
    names = [r["variant"] for r in rows]
    fig = go.Figure()
    fig.add_bar(x=names, y=[r["size_mb"] for r in rows], name="raw", marker_color=VARIANT_COLOR,
                hovertemplate="%{x}: %{y:.3f} MB raw<extra></extra>")
    fig.add_bar(x=names, y=[r.get("size_gzip_mb") for r in rows], name="gzipped",
                marker_color="#93c5fd",
                hovertemplate="%{x}: %{y:.3f} MB gzipped<extra></extra>")
    fig.update_layout(barmode="group")
    _mark_baseline(fig, rows, "size_mb")
    fig = _layout(fig, "Size (raw and gzipped)", "MB")
    fig.update_layout(showlegend=True, legend=dict(orientation="h", y=1.02, x=1,
                                                    xanchor="right", yanchor="bottom"))
    return fig


def pareto_chart(rows: list[dict], front: list[str]) -> go.Figure:
    """Accuracy against latency, marker area proportional to size, the non-dominated
    variants (``front``, ordered by latency) joined by a line."""
    rows = [r for r in ok_rows(rows)
            if _num(r.get("accuracy")) is not None and _num(r.get("p50_ms")) is not None]
    sizes = [_num(r.get("size_mb")) or 0.0 for r in rows]
    biggest = max(sizes) if sizes and max(sizes) > 0 else 1.0
    # sizemode="area": marker area, not diameter, grows with the model's size.
    marker_size = [max(8.0, 40.0 * s / biggest) for s in sizes]
    fig = go.Figure()
    fig.add_scatter(x=[r["p50_ms"] for r in rows], y=[100 * r["accuracy"] for r in rows],
                    mode="markers+text", text=[r["variant"] for r in rows],
                    textposition="top center", name="variants",
                    marker=dict(size=marker_size, sizemode="area",
                                sizeref=2.0 * 40.0 / (40.0 ** 2), color=_colors(rows),
                                line=dict(width=[3 if r.get("noisy") else 0 for r in rows],
                                          color=NOISY_COLOR), opacity=0.8),
                    customdata=sizes,
                    hovertemplate="%{text}<br>%{x:.3f} ms, %{y:.2f}%<br>%{customdata:.3f} MB"
                                  "<extra></extra>")
    by_name = {r["variant"]: r for r in rows}
    pts = [by_name[n] for n in front if n in by_name]
    if pts:
        fig.add_scatter(x=[r["p50_ms"] for r in pts], y=[100 * r["accuracy"] for r in pts],
                        mode="lines", name="Pareto front", hoverinfo="skip",
                        line=dict(color="#16a34a", dash="dot"))
    fig.update_layout(title="Accuracy vs latency (marker area: size; line: Pareto front)",
                      height=CHART_HEIGHT + 80, margin=dict(l=10, r=10, t=40, b=10),
                      xaxis_title="p50 latency (ms per batch)", yaxis_title="accuracy (%)",
                      showlegend=False)
    return fig


def sparsity_chart(per_variant: dict[str, dict[str, float]]) -> go.Figure:
    """Per-layer sparsity of every pruned variant in one heatmap (layers down, variants
    across): one figure however many variants, so a large sweep still draws at once."""
    variants = list(per_variant)
    layers = list(dict.fromkeys(k for v in per_variant.values() for k in v))
    z = [[None if per_variant[v].get(layer) is None else 100 * per_variant[v][layer]
          for v in variants] for layer in layers]
    fig = go.Figure(go.Heatmap(z=z, x=variants, y=layers, zmin=0, zmax=100,
                               colorscale="Blues", colorbar=dict(title="zeros %"),
                               hovertemplate="%{x}<br>%{y}: %{z:.1f}% zeros<extra></extra>"))
    fig.update_layout(height=max(220, 60 + 24 * len(layers)),
                      margin=dict(l=10, r=10, t=30, b=10), yaxis_autorange="reversed")
    return fig


# -- distributed -----------------------------------------------------------------------------

def _by_compression(runs: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for r in runs:
        if r.get("error") or _num(r.get("throughput")) is None:
            continue
        label = r.get("compression", "none") + (" +amp" if r.get("amp") else "")
        groups.setdefault(label, []).append(r)
    for g in groups.values():
        g.sort(key=lambda r: r["workers"])
    return groups


def throughput_chart(runs: list[dict]) -> go.Figure:
    """Throughput against workers, each compression beside its ideal N x throughput(1)."""
    fig = go.Figure()
    for label, group in _by_compression(runs).items():
        xs = [r["workers"] for r in group]
        fig.add_scatter(x=xs, y=[r["throughput"] for r in group], mode="lines+markers",
                        name=label)
        one = next((r for r in group if r["workers"] == 1), None)
        if one:
            fig.add_scatter(x=xs, y=[w * one["throughput"] for w in xs], mode="lines",
                            name=f"ideal ({label})", line=dict(dash="dash"), opacity=0.6)
    fig.update_layout(title="Throughput vs workers (dashed: ideal N x one worker)",
                      height=CHART_HEIGHT, margin=dict(l=10, r=10, t=40, b=10),
                      xaxis_title="workers", yaxis_title="samples / s", xaxis_dtick=1)
    return fig


def efficiency_chart(runs: list[dict]) -> go.Figure:
    fig = go.Figure()
    for label, group in _by_compression(runs).items():
        pts = [r for r in group if _num(r.get("scaling_efficiency")) is not None]
        fig.add_scatter(x=[r["workers"] for r in pts],
                        y=[100 * r["scaling_efficiency"] for r in pts],
                        mode="lines+markers", name=label)
    fig.add_hline(y=100, line_dash="dash", line_color=BASELINE_COLOR)
    fig.update_layout(title="Scaling efficiency", height=CHART_HEIGHT,
                      margin=dict(l=10, r=10, t=40, b=10), xaxis_title="workers",
                      yaxis_title="% of ideal", xaxis_dtick=1)
    return fig


def bytes_chart(runs: list[dict]) -> go.Figure:
    fig = go.Figure()
    for label, group in _by_compression(runs).items():
        pts = [r for r in group if _num(r.get("bytes_per_step")) is not None]
        fig.add_bar(x=[str(r["workers"]) for r in pts],
                    y=[r["bytes_per_step"] / 1e6 for r in pts], name=label)
    fig.update_layout(title="Bytes communicated per step", height=CHART_HEIGHT,
                      margin=dict(l=10, r=10, t=40, b=10), xaxis_title="workers",
                      yaxis_title="MB / step", barmode="group")
    return fig
