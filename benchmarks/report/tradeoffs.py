"""The trade-off figures: the Pareto frontier of accuracy against latency, a curve per swept
setting (accuracy with its interval, latency and size against the setting's values, a line per
method). The roofline is in roofline_chart.py.

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
