"""The trade-off figures: the Pareto frontier of accuracy against latency, a curve per swept
setting (accuracy with its interval, latency and size against the setting's values, a line per
method), and the roofline (each variant's achieved FLOP/s against the device's roofs).

Legible at 30 variants: the Pareto chart labels only its frontier, placed apart.
"""

from __future__ import annotations

import math
from collections import defaultdict

import plotly.graph_objects as go

from benchmarks.report.style import (
    BASELINE_COLOR,
    CHART_HEIGHT,
    FAILED_COLOR,
    FRONT_COLOR,
    INK,
    NOISY_COLOR,
    PALETTE,
    VARIANT_COLOR,
    is_baseline,
    log_ticks,
    num,
    ok_rows,
    short,
    with_legend,
)


def pareto_points(rows: list[dict]) -> list[dict]:
    return [r for r in ok_rows(rows)
            if num(r.get("accuracy")) is not None and num(r.get("p50_ms")) is not None]


def pareto_front_of(rows: list[dict]) -> list[str]:
    """The variants no other beats on both accuracy and latency, by latency."""
    from benchmarks.report.comparisons import pareto_front
    return pareto_front([(r["variant"], r["accuracy"], r["p50_ms"])
                         for r in pareto_points(rows)])


# Where a frontier label may go around its point, in order of preference, as plotly names
# them and as offsets of the label's centre in label widths and heights.
LABEL_SPOTS = (("top center", 0, 1), ("bottom center", 0, -1), ("middle right", 0.6, 0),
               ("middle left", -0.6, 0), ("top right", 0.6, 1), ("top left", -0.6, 1),
               ("bottom right", 0.6, -1), ("bottom left", -0.6, -1))
# Beyond the eight spots beside a point: the same directions farther out, drawn as an
# annotation with an arrow back to its point (plotly's textposition only reaches the first
# ring). Crowded frontiers (amp and int8 at one latency) get a label there, not none.
LABEL_RINGS = (1, 2, 3)


# The plot area assumed when placing labels: smaller than any the pages draw, so labels
# placed apart here are at least as far apart on the page (the page's measured 480x253 at
# 1400x900 and 1280x800, less the room plotly's autorange gives the markers and whiskers).
PLOT_PX = (380.0, 180.0)
CHAR_PX, LINE_PX = 7.5, 16.0
# Marker area grows with the model's size (plotly's sizemode="area"): sizes 8 to 40.
MARKER_MIN, MARKER_MAX = 8.0, 40.0
MARKER_SIZEREF = 2.0 * MARKER_MAX / MARKER_MAX ** 2


def marker_sizes(rows: list[dict]) -> list[float]:
    """Each point's plotly marker size (an area: a bigger model, a bigger disc)."""
    sizes = [num(r.get("size_mb")) or 0.0 for r in rows]
    biggest = max(sizes) if sizes and max(sizes) > 0 else 1.0
    return [max(MARKER_MIN, MARKER_MAX * s / biggest) for s in sizes]


def _radius(size: float) -> float:
    """A marker's radius in pixels, as plotly draws an area-mode size."""
    return 0.5 * math.sqrt(size / MARKER_SIZEREF)


def label_boxes(rows: list[dict], front: list[str]) -> dict[str, tuple]:
    """Where each label goes: {variant: (ring, spot name, box)} in pixels of the assumed plot
    area, no two boxes (nor a box and a point) overlapping. The baseline first (always named:
    every other point reads against it), then the frontier by latency; a point with no free
    spot in any ring is named on hover only."""
    by_name = {r["variant"]: r for r in rows}
    base = [r["variant"] for r in rows if is_baseline(r)]
    pts = [by_name[n] for n in dict.fromkeys([*base[:1], *front]) if n in by_name]
    if not pts:
        return {}
    xs = [r["p50_ms"] for r in rows]
    ys = [100 * r["accuracy"] for r in rows]
    lows = [100 * (num(r.get("accuracy_ci_low")) or r["accuracy"]) for r in rows]
    highs = [100 * (num(r.get("accuracy_ci_high")) or r["accuracy"]) for r in rows]
    x0, x1, y0, y1 = pareto_frame(rows)

    def px(x, y):
        return ((x - x0) / (x1 - x0) * PLOT_PX[0], (y - y0) / (y1 - y0) * PLOT_PX[1])

    # Each point's disc as drawn (a label over a big model's disc is hidden by it).
    radii = {r["variant"]: _radius(m) for r, m in zip(rows, marker_sizes(rows))}
    discs = {r["variant"]: (cx - radii[r["variant"]], cy - radii[r["variant"]],
                            cx + radii[r["variant"]], cy + radii[r["variant"]])
             for r, (cx, cy) in zip(rows, (px(x, y) for x, y in zip(xs, ys)))}
    taken = list(discs.values())
    placed: dict[str, tuple] = {}
    for r in pts:
        cx, cy = px(r["p50_ms"], 100 * r["accuracy"])
        own = discs[r["variant"]]
        w, h = CHAR_PX * len(short(r["variant"])), LINE_PX
        for ring in LABEL_RINGS:
            for name, dx, dy in LABEL_SPOTS:
                gap = radii[r["variant"]] + 3 + (ring - 1) * 1.5 * h
                left = cx + ring * dx * w - w / 2 + (gap if dx > 0 else -gap if dx < 0 else 0)
                bottom = cy + dy * (h / 2 + gap) - h / 2
                box = (left, bottom, left + w, bottom + h)
                inside = box[0] >= -40 and box[2] <= PLOT_PX[0] + 40 and box[1] >= -20 and \
                    box[3] <= PLOT_PX[1] + 30
                if inside and not any(_overlap(box, t) for t in taken if t != own):
                    placed[r["variant"]] = (ring, name, box)
                    taken.append(box)
                    break
            if r["variant"] in placed:
                break
    return placed


def pareto_frame(rows: list[dict]) -> tuple[float, float, float, float]:
    """The chart's axis ranges (x0, x1, y0, y1): the points and their intervals, padded 6%.
    The chart is drawn over exactly these, so the label placement's pixels are the page's,
    scaled up (the page's plot area is larger than PLOT_PX)."""
    xs = [q["p50_ms"] for q in rows]
    lows = [100 * (num(q.get("accuracy_ci_low")) or q["accuracy"]) for q in rows]
    highs = [100 * (num(q.get("accuracy_ci_high")) or q["accuracy"]) for q in rows]
    x0, x1, y0, y1 = min(xs), max(xs), min(lows), max(highs)
    xpad, ypad = 0.06 * ((x1 - x0) or 1.0), 0.06 * ((y1 - y0) or 1.0)
    return x0 - xpad, x1 + xpad, y0 - ypad, y1 + ypad


def _pixel(rows: list[dict], r: dict) -> tuple[float, float]:
    """A point's place in the assumed plot area, as ``label_boxes`` computes it."""
    x0, x1, y0, y1 = pareto_frame(rows)
    return ((r["p50_ms"] - x0) / (x1 - x0) * PLOT_PX[0],
            (100 * r["accuracy"] - y0) / (y1 - y0) * PLOT_PX[1])


def _data(rows: list[dict], cx: float, cy: float) -> tuple[float, float]:
    """A place in the assumed plot area in the chart's data units (``_pixel`` reversed)."""
    x0, x1, y0, y1 = pareto_frame(rows)
    return x0 + cx / PLOT_PX[0] * (x1 - x0), y0 + cy / PLOT_PX[1] * (y1 - y0)


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


PARETO_GROUPS = (("Pareto front", FRONT_COLOR), ("baseline", BASELINE_COLOR),
                 ("dominated", VARIANT_COLOR))
NOISY_RING = "amber ring: noisy latency (rerun before trusting small differences)"


def pareto_chart(rows: list[dict], front: list[str]) -> go.Figure:
    """Accuracy against latency, marker area proportional to size, the non-dominated
    variants (``front``, ordered by latency) joined by a line and labelled; the others are
    named on hover only, so labels never pile up. Each point's ``customdata`` starts with its
    variant's name: what a click on it picks."""
    rows = pareto_points(rows)
    sizes = [num(r.get("size_mb")) or 0.0 for r in rows]
    markers = marker_sizes(rows)
    on_front = set(front)
    boxes = label_boxes(rows, front)
    fig = go.Figure()

    def group_of(r):
        return "Pareto front" if r["variant"] in on_front else \
            "baseline" if is_baseline(r) else "dominated"
    for group, color in PARETO_GROUPS:
        idx = [i for i, r in enumerate(rows) if group_of(r) == group]
        if not idx:
            continue
        pts = [rows[i] for i in idx]
        fig.add_scatter(
            x=[r["p50_ms"] for r in pts], y=[100 * r["accuracy"] for r in pts],
            mode="markers", name=group,
            error_y=dict(type="data", symmetric=False,
                         array=[100 * ((num(r.get("accuracy_ci_high")) or r["accuracy"])
                                       - r["accuracy"]) for r in pts],
                         arrayminus=[100 * (r["accuracy"] - (num(r.get("accuracy_ci_low"))
                                                             or r["accuracy"])) for r in pts],
                         thickness=1, width=0, color=INK),
            # sizemode="area": marker area, not diameter, grows with the model's size.
            marker=dict(size=[markers[i] for i in idx],
                        sizemode="area", sizeref=MARKER_SIZEREF, color=color,
                        line=dict(width=[3 if r.get("noisy") else 0 for r in pts],
                                  color=NOISY_COLOR), opacity=0.85),
            customdata=[[r["variant"], sizes[i], throughput_text(r)] for r, i in zip(pts, idx)],
            hovertemplate="%{customdata[0]}<br>%{x:.3f} ms, %{y:.2f}%<br>"
                          "%{customdata[1]:.3f} MB<br>%{customdata[2]}<extra></extra>")
    by_name = {r["variant"]: r for r in rows}
    pts = [by_name[n] for n in front if n in by_name]
    if pts:
        fig.add_scatter(x=[r["p50_ms"] for r in pts], y=[100 * r["accuracy"] for r in pts],
                        mode="lines", name="Pareto front line", hoverinfo="skip",
                        showlegend=False, line=dict(color=FRONT_COLOR, dash="dot"))
    if any(r.get("noisy") for r in rows):
        fig.add_scatter(x=[None], y=[None], mode="markers", name=NOISY_RING, hoverinfo="skip",
                        marker=dict(size=10, color="rgba(0,0,0,0)",
                                    line=dict(width=3, color=NOISY_COLOR)))
    # Every label centred where label_boxes put it, in data units over axes drawn to the same
    # ranges: on the page (a larger plot area) labels and points stand farther apart than
    # where they were placed, never closer (plotly's textposition and pixel offsets set a
    # label off by the marker's size or by a fixed distance, and two overlapped on the page).
    by_name = {r["variant"]: r for r in rows}
    for name, (ring, _, box) in boxes.items():
        r = by_name[name]
        lx, ly = _data(rows, (box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
        if ring == 1:
            fig.add_annotation(x=lx, y=ly, text=short(name), showarrow=False,
                               font=dict(size=11))
        else:  # an arrow from the label back to its point
            fig.add_annotation(x=r["p50_ms"], y=100 * r["accuracy"], ax=lx, ay=ly,
                               axref="x", ayref="y", text=short(name), showarrow=True,
                               arrowhead=0, arrowwidth=1, arrowcolor=INK,
                               font=dict(size=11))
    x0, x1, y0, y1 = pareto_frame(rows)
    fig.update_xaxes(range=[x0, x1])
    fig.update_yaxes(range=[y0, y1])
    fig.update_layout(title="Accuracy vs latency (marker area: size)",
                      height=CHART_HEIGHT + 80, margin=dict(l=10, r=10, t=40, b=10),
                      xaxis_title="p50 latency (ms per batch)", yaxis_title="accuracy (%)",
                      clickmode="event+select")
    return with_legend(fig)


def swept_axes(rows: list[dict]) -> list[str]:
    """The settings swept in these rows (those with more than one value)."""
    values = defaultdict(set)
    for r in rows:
        for k, v in r.items():
            if k.startswith("axis:") and v is not None:
                values[k[5:]].add(v if not isinstance(v, list) else tuple(v))
    return sorted(a for a, vs in values.items() if len(vs) > 1)


def _numeric(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def curve_axes(rows: list[dict]) -> list[str]:
    """The swept settings a curve is drawn against: the numeric ones. A categorical one (the
    pruning method, a precision) is never an x axis joined by lines: each of its values is a
    line of its own on the numeric axes' curves."""
    return [a for a in swept_axes(rows)
            if all(_numeric(r[f"axis:{a}"]) for r in rows if r.get(f"axis:{a}") is not None)]


CURVE_FIGURES = (("accuracy", "accuracy (%)", 100.0), ("p50_ms", "p50 (ms per batch)", 1.0),
                 ("size_mb", "size (MB)", 1.0))


def curve_chart(rows: list[dict], axis: str) -> go.Figure:
    """Accuracy, p50 latency and size against one swept setting, one line per combination of
    the other settings swept with it (e.g. per pruning method), the baseline as a reference
    line, failed points marked with a red cross."""
    from plotly.subplots import make_subplots
    key = f"axis:{axis}"
    points = [r for r in rows if r.get(key) is not None]
    if not all(_numeric(r[key]) for r in points):
        raise ValueError(f"a curve needs a numeric swept setting; {axis} takes categories "
                         f"(numeric ones here: {', '.join(curve_axes(rows)) or 'none'})")
    others = sorted({k for r in points for k in r if k.startswith("axis:") and k != key
                     and r.get(k) is not None and _varies(points, k)})
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in points:
        group = ", ".join(f"{k[5:].split('.', 1)[-1]}={r.get(k)}" for k in others) or "variants"
        if "+" in (r.get("techniques") or ""):
            group += " (chained)"
        groups[group].append(r)
    base = next((r for r in rows if is_baseline(r) and not r.get("error")), None)
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t, _ in CURVE_FIGURES],
                        horizontal_spacing=0.08)
    for g, (label, members) in enumerate(sorted(groups.items())):
        members = sorted(members, key=lambda r: r[key])
        color = PALETTE[g % len(PALETTE)]
        for col, (figure, _, scale) in enumerate(CURVE_FIGURES, start=1):
            good = [r for r in members if not r.get("error") and num(r.get(figure)) is not None]
            fig.add_scatter(
                x=[r[key] for r in good], y=[r[figure] * scale for r in good],
                mode="lines+markers", name=label, legendgroup=label, showlegend=col == 1,
                line=dict(color=color), marker=dict(color=color),
                error_y=_curve_error(good) if figure == "accuracy" else None,
                customdata=[r["variant"] for r in good],
                hovertemplate="%{customdata}<br>%{x}: %{y:.3f}<extra></extra>",
                row=1, col=col)
            failed = [r for r in members if r.get("error")]
            if failed:
                fig.add_scatter(x=[r[key] for r in failed],
                                y=[_failed_y(rows, figure, scale)] * len(failed),
                                mode="markers", marker=dict(symbol="x", size=11,
                                                            color=FAILED_COLOR),
                                name="failed", legendgroup="failed",
                                showlegend=col == 1 and g == 0,
                                customdata=[f"{r['variant']}: {r['error']}" for r in failed],
                                hovertemplate="%{customdata}<extra>failed</extra>",
                                row=1, col=col)
    # The baseline: one dashed line across each subplot, added in one go (plotly's add_hline
    # re-validates every shape at each call: at 30 variants a line per group took seconds).
    shapes, notes = [], []
    for col, (figure, _, scale) in enumerate(CURVE_FIGURES, start=1):
        if base is not None and num(base.get(figure)) is not None:
            axis_id = "" if col == 1 else str(col)
            y = base[figure] * scale
            shapes.append(dict(type="line", xref=f"x{axis_id} domain", x0=0, x1=1,
                               yref=f"y{axis_id}", y0=y, y1=y,
                               line=dict(dash="dash", color=BASELINE_COLOR)))
            notes.append(dict(text="baseline", xref=f"x{axis_id} domain", x=1,
                              yref=f"y{axis_id}", y=y, showarrow=False, xanchor="right",
                              yanchor="bottom"))
    fig.update_layout(shapes=shapes, annotations=[*fig.layout.annotations, *notes])
    fig.update_xaxes(title=axis)
    fig.update_layout(title=f"Trade-off against {axis}", height=CHART_HEIGHT + 40,
                      margin=dict(l=10, r=10, t=60, b=10),
                      legend=dict(orientation="h", y=-0.25))
    return fig


def _varies(points: list[dict], key: str) -> bool:
    return len({str(r.get(key)) for r in points}) > 1


def _curve_error(rows: list[dict]) -> dict | None:
    if not any(num(r.get("accuracy_ci_low")) is not None for r in rows):
        return None
    return dict(type="data", symmetric=False, thickness=1, width=3,
                array=[100 * ((num(r.get("accuracy_ci_high")) or r["accuracy"]) - r["accuracy"])
                       for r in rows],
                arrayminus=[100 * (r["accuracy"] - (num(r.get("accuracy_ci_low"))
                                                    or r["accuracy"])) for r in rows])


def _failed_y(rows: list[dict], figure: str, scale: float) -> float:
    """Where a failed point is drawn: at the bottom of what the others span."""
    values = [r[figure] * scale for r in rows if num(r.get(figure)) is not None]
    return min(values) if values else 0.0


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
                            hovertemplate=f"{label}: peak {peak / GIGA:,.1f} GFLOP/s, "
                                          f"{bandwidth / GIGA:,.1f} GB/s<extra></extra>")
        derivation = (peaks[device].get("theoretical") or {}).get("derivation") or {}
        for precisions, peak in _coinciding(theory[device]):
            precision = precisions[0]
            names = " / ".join(precisions)  # fp32 and bf16 share a roof without bf16 units
            label = f"{device} {names}" if len(devices) > 1 else names
            how = "<br>".join(derivation.get(p, "") for p in precisions) or \
                (peaks[device].get("theoretical") or {}).get("source", "")
            fig.add_scatter(x=[ridge_point(peak, bandwidth), high], y=[peak / GIGA] * 2,
                            mode="lines+text", name=f"{label} theoretical roof",
                            legendgroup="roofs", showlegend=False,
                            text=["", f"{label} theoretical"], textposition="top left",
                            line=dict(color=precision_color(precision, BASELINE_COLOR),
                                      width=1.2, dash="dash"),
                            hovertemplate=f"{label} theoretical: {peak / GIGA:,.1f} GFLOP/s"
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


def throughput_text(row: dict) -> str:
    """Samples/s of the median call and sustained over the timed windows, for a hover."""
    median, sustained = num(row.get("throughput")), num(row.get("throughput_sustained"))
    if median is None:
        return "not timed"
    text = f"{median:,.0f} samples/s at the median call"
    if sustained is not None:
        text += f", {sustained:,.0f} sustained"
        if row.get("contention"):
            text += " (contention!)"
    return text
