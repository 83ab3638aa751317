"""The roofline: each variant's achieved FLOP/s against its arithmetic intensity, under the
device's measured roofs and the theoretical one of each precision a variant ran in."""

from __future__ import annotations

import plotly.graph_objects as go

from benchmarks.report.chart_text import escape, join
from benchmarks.report.style import (
    BASELINE_COLOR,
    CHART_HEIGHT,
    FAILED_COLOR,
    INK,
    VARIANT_COLOR,
    is_baseline,
    log_ticks,
    num,
    ok_rows,
)
from benchmarks.report.tradeoffs import throughput_text


ABOVE_ROOF = "above the theoretical roof (a FLOP count or roof is wrong)"
LEGEND_KEY = "legend key"  # the ``meta`` of a trace drawn only to name a group in the legend


def precision_color(precision: str | None, default: str) -> str:
    """A precision's colour, from its registry entry; ``default`` for one not registered."""
    from benchmarks.measure import precisions
    return precisions.get(precision).color if precisions.known(precision) else default


GIGA = 1e9


def roofline_points(rows: list[dict]) -> list[dict]:
    """The rows placed on the roofline: timed, counted, and in a registered precision (one in
    a precision no one registered carries ``roofline_warning`` instead)."""
    return [r for r in ok_rows(rows) if num(r.get("achieved_flops_per_s")) is not None
            and num(r.get("arithmetic_intensity")) is not None
            and not r.get("roofline_warning")]


def roofline_warnings(rows: list[dict]) -> list[str]:
    """One line per variant left off the roofline for its unregistered precision."""
    return [f"{r['variant']}: {r['roofline_warning']}" for r in rows
            if r.get("roofline_warning")]


def roofline_chart(rows: list[dict], peaks: dict) -> go.Figure:
    """Log-log: FLOP/s against arithmetic intensity (FLOPs per byte moved). Each device's
    memory roof (its copy bandwidth times the intensity) meets a flat compute roof per
    precision (its measured peak); beside it, dashed, the theoretical peak of each precision
    a variant ran in (``benchmarks.measure.theory``). One point per variant, coloured by the
    precision most of its multiply-adds ran in; one above its theoretical roof says so in its
    legend entry and hover. A point far below its roof leaves the kernels idle (small or
    irregular shapes, launch overhead); one under the slanted roof is memory-bound."""
    from benchmarks.measure.roofline import ridge_point
    points = roofline_points(rows)
    devices = [d for d in dict.fromkeys(r.get("device") for r in points) if d in peaks]
    xs = [r["arithmetic_intensity"] for r in points]
    theory = {d: _theoretical_roofs(peaks[d], {r.get("precision") for r in points
                                               if r.get("device") == d}) for d in devices}
    ridges = [ridge_point(p, peaks[d]["memory_bytes_per_s"]) for d in devices
              for p in [*peaks[d]["gemm_flops_per_s"].values(), *theory[d].values()]]
    low = min(xs + ridges, default=1.0) / 4
    high = max(xs + ridges, default=10.0) * 4
    fig = go.Figure()
    for n, device in enumerate(devices):
        bandwidth = peaks[device]["memory_bytes_per_s"]
        dash = "solid" if n == 0 else "dot"
        for precision, peak in peaks[device]["gemm_flops_per_s"].items():
            ridge = ridge_point(peak, bandwidth)
            label = f"{device} {precision}" if len(devices) > 1 else precision
            fig.add_scatter(x=[low, ridge, high], y=[low * bandwidth / GIGA, peak / GIGA,
                                                     peak / GIGA],
                            # Named at its ridge, under the flat roof (ridges differ, so
                            # names spread out; the theoretical ones sit at the right end):
                            # the legend has one entry for all roofs.
                            mode="lines+text", name=f"{label} roof", legendgroup="roofs",
                            showlegend=False, text=["", label, ""],
                            textposition="bottom right",
                            line=dict(color=precision_color(precision, BASELINE_COLOR),
                                      width=1.5, dash=dash),
                            hovertemplate=f"{escape(label)}: peak {peak / GIGA:,.1f} GFLOP/s, "
                                          f"{bandwidth / GIGA:,.1f} GB/s<extra></extra>")
        derivation = (peaks[device].get("theoretical") or {}).get("derivation") or {}
        for precisions, peak in _coinciding(theory[device]):
            precision = precisions[0]
            names = " / ".join(precisions)  # fp32 and bf16 share a roof without bf16 units
            label = f"{device} {names}" if len(devices) > 1 else names
            # Stored text (the card's derivation lines), joined by the product's <br>.
            how = join("<br>", [derivation.get(p, "") for p in precisions]) or \
                escape((peaks[device].get("theoretical") or {}).get("source", ""))
            fig.add_scatter(x=[ridge_point(peak, bandwidth), high], y=[peak / GIGA] * 2,
                            mode="lines+text", name=f"{label} theoretical roof",
                            legendgroup="roofs", showlegend=False,
                            text=["", f"{label} theoretical"], textposition="top left",
                            line=dict(color=precision_color(precision, BASELINE_COLOR),
                                      width=1.2, dash="dash"),
                            hovertemplate=f"{escape(label)} theoretical: "
                                          f"{peak / GIGA:,.1f} GFLOP/s"
                                          f"<br>{how}<extra></extra>")
    shown: set[str] = set()
    for name, dash in (("measured roofs (colour: precision)", "solid"),
                       ("theoretical roofs", "dash")):
        if name.startswith("theoretical") and not any(theory.values()):
            continue
        fig.add_scatter(x=[None], y=[None], mode="lines", name=name, legendgroup="roofs",
                        hoverinfo="skip", meta=LEGEND_KEY,
                        line=dict(color=BASELINE_COLOR, width=1.5, dash=dash))
    # One trace per variant (a click or hover names it), grouped in the legend: a few entries
    # (the roofs, a precision each, the baseline, a flag) rather than one per variant; the
    # colour says the precision, a diamond the baseline, a red outline a flag.
    for n, r in enumerate(points):
        flagged = bool(r.get("above_theoretical"))
        group = ABOVE_ROOF if flagged else "baseline (diamond)" if is_baseline(r) else \
            f"{r.get('precision') or 'unknown'} variants"
        fig.add_scatter(
            x=[r["arithmetic_intensity"]], y=[r["achieved_flops_per_s"] / GIGA], mode="markers",
            name=group, legendgroup=group, showlegend=group not in shown,
            marker=dict(size=12, color=precision_color(r.get("precision"), VARIANT_COLOR),
                        symbol="diamond" if is_baseline(r) else "circle",
                        line=dict(width=3 if flagged else 1,
                                  color=FAILED_COLOR if flagged else INK)),
            customdata=[[r["variant"], num(r.get("percent_of_peak")) or 0.0,
                         r.get("bound") or "-", r.get("device"), _peak_flag(r),
                         throughput_text(r)]],
            hovertemplate="%{customdata[0]} (%{customdata[3]})<br>%{y:,.2f} GFLOP/s at "
                          "%{x:.2f} FLOP/byte<br>%{customdata[1]:.1f}% of the peak"
                          "%{customdata[4]}; %{customdata[2]}-bound<br>%{customdata[5]}"
                          "<extra></extra>")
        shown.add(group)
    # Ticked at decades, labelled in full (plotly's own log ticks read "2 5 1 2 5 10"; issue
    # 32.8), over the range the roofs and points span.
    ys = [y for trace in fig.data for y in (trace.y or ()) if y is not None and y > 0]
    fig.update_xaxes(title="arithmetic intensity (FLOPs per byte moved)",
                     **{"type": "log", **log_ticks(low, high)})
    fig.update_yaxes(title="GFLOP/s",
                     **{"type": "log", **log_ticks(min(ys, default=1.0), max(ys, default=10.0))})
    fig.update_layout(title="Roofline: achieved FLOP/s against the measured roofs "
                            "(dashed: theoretical)",
                      height=CHART_HEIGHT + 140, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", y=-0.25))
    for n, line in enumerate(roofline_warnings(rows)):  # left off, and said so
        fig.add_annotation(text=line, xref="paper", yref="paper", x=0, y=1 - 0.06 * n,
                           xanchor="left", showarrow=False, font=dict(color=FAILED_COLOR))
    return fig


def _theoretical_roofs(peaks: dict, precisions: set) -> dict:
    """The theoretical peaks of the precisions the device's points ran in."""
    theory = (peaks.get("theoretical") or {}).get("gemm_flops_per_s") or {}
    return {p: v for p, v in theory.items() if p in precisions and v}


def _coinciding(roofs: dict) -> list[tuple[list[str], float]]:
    """Theoretical roofs grouped by height: one line (and label) for precisions that share
    one (fp32 and bf16 on a CPU without bf16 instructions)."""
    groups: dict[float, list[str]] = {}
    for precision, peak in roofs.items():
        groups.setdefault(peak, []).append(precision)
    return [(names, peak) for peak, names in groups.items()]


def _peak_flag(row: dict) -> str:
    if row.get("above_theoretical"):
        return " (above the theoretical roof!)"
    return " (above the roof after measuring it again!)" if row.get("above_peak") else ""

