"""The data-parallel benchmark's figures: throughput, scaling efficiency and bytes on the
wire per compression, against the number of workers."""

from __future__ import annotations

import plotly.graph_objects as go

from benchmarks.report.style import BASELINE_COLOR, CHART_HEIGHT, num


def _by_compression(runs: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for r in runs:
        if r.get("error") or num(r.get("throughput")) is None:
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
        pts = [r for r in group if num(r.get("scaling_efficiency")) is not None]
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
        pts = [r for r in group if num(r.get("bytes_per_step")) is not None]
        fig.add_bar(x=[str(r["workers"]) for r in pts],
                    y=[r["bytes_per_step"] / 1e6 for r in pts], name=label)
    fig.update_layout(title="Bytes communicated per step", height=CHART_HEIGHT,
                      margin=dict(l=10, r=10, t=40, b=10), xaxis_title="workers",
                      yaxis_title="MB / step", barmode="group")
    return fig
