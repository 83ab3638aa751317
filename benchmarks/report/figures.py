"""Plotly figures built from the engine's comparison rows (``benchmarks.report.results``).

Figures only: no Streamlit, no torch, so the dashboard (``dashboard/charts.py`` re-exports
this module), the HTML report and a notebook share one copy. Rows are the dicts of
``RunReport.rows()``; the baseline is the row marked ``is_baseline``. ``run_figures`` is every
chart of one run, in reading order: what the Results page draws and the report holds.

Legible at 30 variants: bars are horizontal with short labels (the full name on hover),
accuracy sits on an axis fitted to the data with its 95% interval drawn, differences within
noise are drawn pale, the Pareto chart labels only its frontier, and every swept setting gets
curves of accuracy, latency and size against its values. The roofline sets each variant's
achieved FLOP/s against the device's measured roofs.
"""

from __future__ import annotations

import math
from collections import defaultdict

import plotly.graph_objects as go

BASELINE_COLOR = "#6b7280"
VARIANT_COLOR = "#2563eb"
NOISE_COLOR = "#93c5fd"      # a change within noise: drawn pale
NOISY_COLOR = "#f59e0b"
FAILED_COLOR = "#dc2626"
FRONT_COLOR = "#16a34a"
CHART_HEIGHT = 320
SHORT_LABEL = 22             # characters of a variant's name on an axis; the rest on hover
PALETTE = ["#2563eb", "#db2777", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#65a30d",
           "#b91c1c"]

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
    if "is_baseline" in row:
        return bool(row["is_baseline"])
    return row.get("techniques") in ("-", "", None)


def ok_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if not r.get("error")]


def short(name: str, limit: int = SHORT_LABEL) -> str:
    """A name that fits an axis: long chained names keep their start and end."""
    if len(name) <= limit:
        return name
    keep = (limit - 1) // 2
    return f"{name[:keep]}…{name[-(limit - 1 - keep):]}"


def _labels(rows: list[dict]) -> list[str]:
    """Short labels, made unique (two long names may shorten alike)."""
    out, seen = [], defaultdict(int)
    for r in rows:
        label = short(r["variant"])
        seen[label] += 1
        if seen[label] > 1:  # the tag fits in the same width
            tag = f" ({seen[label]})"
            label = short(r["variant"], SHORT_LABEL - len(tag)) + tag
        out.append(label)
    return out


def _layout(fig: go.Figure, title: str, axis_title: str, n: int) -> go.Figure:
    fig.update_layout(title=title, height=max(CHART_HEIGHT, 90 + 22 * n),
                      margin=dict(l=10, r=10, t=40, b=10), showlegend=False, bargap=0.25)
    fig.update_xaxes(title=axis_title)
    fig.update_yaxes(autorange="reversed", automargin=True)  # first variant on top
    return fig


def _colors(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        if is_baseline(r):
            out.append(BASELINE_COLOR)
        elif r.get("within_noise"):
            out.append(NOISE_COLOR)
        else:
            out.append(VARIANT_COLOR)
    return out


def _mark_baseline(fig: go.Figure, rows: list[dict], key: str, scale: float = 1.0) -> None:
    """A dashed line at the baseline's value, so every bar reads against it."""
    base = next((r for r in rows if is_baseline(r)), None)
    value = _num(base.get(key)) if base else None
    if value is not None:
        fig.add_vline(x=value * scale, line_dash="dash", line_color=BASELINE_COLOR,
                      annotation_text="baseline", annotation_position="top")


def accuracy_chart(rows: list[dict]) -> go.Figure:
    """Accuracy with its 95% interval, on an axis fitted to the data: a 2-point loss shows.
    Pale bars: the change against the baseline is within noise (paired test)."""
    rows = [r for r in ok_rows(rows) if _num(r.get("accuracy")) is not None]
    acc = [100 * r["accuracy"] for r in rows]
    low = [100 * (_num(r.get("accuracy_ci_low")) or r["accuracy"]) for r in rows]
    high = [100 * (_num(r.get("accuracy_ci_high")) or r["accuracy"]) for r in rows]
    fig = go.Figure(go.Bar(
        y=_labels(rows), x=acc, orientation="h", marker_color=_colors(rows),
        error_x=dict(type="data", symmetric=False, array=[h - a for h, a in zip(high, acc)],
                     arrayminus=[a - lo for a, lo in zip(acc, low)], color="#374151",
                     thickness=1.2, width=4),
        text=[f"{a:.1f}" for a in acc], textposition="inside", insidetextanchor="end",
        customdata=[[r["variant"], lo, h, _noise_text(r)] for r, lo, h in zip(rows, low, high)],
        hovertemplate="%{customdata[0]}<br>%{x:.2f}% (95% CI %{customdata[1]:.1f}-"
                      "%{customdata[2]:.1f})<br>%{customdata[3]}<extra></extra>"))
    if acc:
        span = max(high) - min(low)
        pad = max(0.5, 0.1 * span)
        fig.update_xaxes(range=[max(0.0, min(low) - pad), min(100.0, max(high) + pad)])
    _mark_baseline(fig, rows, "accuracy", 100.0)
    return _layout(fig, "Accuracy (95% interval; pale: within noise)", "%", len(rows))


def _noise_text(row: dict) -> str:
    if is_baseline(row):
        return "baseline"
    p = row.get("p_value_vs_base")
    if p is None:
        return "no paired test"
    return f"p = {p:.3g} vs baseline: " + ("within noise" if row.get("within_noise")
                                           else "a real difference")


def latency_chart(rows: list[dict]) -> go.Figure:
    """p50 bars with whiskers up to p90 (thick) and p99 (thin); noisy latencies in amber
    and marked with a '!'."""
    rows = [r for r in ok_rows(rows) if _num(r.get("p50_ms")) is not None]
    labels = _labels(rows)
    p50 = [r["p50_ms"] for r in rows]
    p90 = [max(0.0, (_num(r.get("p90_ms")) or r["p50_ms"]) - r["p50_ms"]) for r in rows]
    p99 = [max(0.0, (_num(r.get("p99_ms")) or r["p50_ms"]) - r["p50_ms"]) for r in rows]
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
                             r.get("device"), r.get("timing")] for r in rows],
                hovertemplate="%{customdata[0]} (%{customdata[4]})<br>p50 %{x:.3f} ms<br>p90 "
                              "%{customdata[1]:.3f} ms<br>p99 %{customdata[2]:.3f} ms<br>"
                              "noisy: %{customdata[3]}; timed %{customdata[5]}<extra></extra>")
    # p90 whisker drawn as an invisible bar's error bar so both tails show on one bar.
    fig.add_bar(y=labels, x=p50, orientation="h", marker_color="rgba(0,0,0,0)",
                hoverinfo="skip", name="p90",
                error_x=dict(type="data", symmetric=False, array=p90, arrayminus=[0] * len(p90),
                             thickness=3, width=0, color="#111827"))
    fig.update_layout(barmode="overlay")
    _mark_baseline(fig, rows, "p50_ms")
    # A disturbed run can have p99 tails many times the median; a log axis keeps the p50 bars
    # readable without hiding the tails.
    top = max((p + t for p, t in zip(p50, p99)), default=0.0)
    log = bool(p50) and top > 4 * max(p50)
    if log:
        fig.update_xaxes(type="log")
    return _layout(fig, "Latency p50 (whiskers p90 / p99)" + (", log" if log else ""),
                   "ms per batch", len(rows))


def memory_chart(rows: list[dict]) -> go.Figure:
    rows = [r for r in ok_rows(rows) if _num(r.get("peak_memory_mb")) is not None]
    fig = go.Figure(go.Bar(y=_labels(rows), x=[r["peak_memory_mb"] for r in rows],
                           orientation="h",
                           marker_color=[BASELINE_COLOR if is_baseline(r) else VARIANT_COLOR
                                         for r in rows],
                           customdata=[[r["variant"], r.get("memory_method")] for r in rows],
                           hovertemplate="%{customdata[0]}: %{x:.2f} MB (%{customdata[1]})"
                                         "<extra></extra>"))
    _mark_baseline(fig, rows, "peak_memory_mb")
    return _layout(fig, "Peak memory", "MB", len(rows))


def size_chart(rows: list[dict]) -> go.Figure:
    rows = [r for r in ok_rows(rows) if _num(r.get("size_mb")) is not None]
    labels = _labels(rows)
    names = [r["variant"] for r in rows]
    fig = go.Figure()
    fig.add_bar(y=labels, x=[r["size_mb"] for r in rows], name="raw", orientation="h",
                marker_color=VARIANT_COLOR, customdata=names,
                hovertemplate="%{customdata}: %{x:.3f} MB raw<extra></extra>")
    fig.add_bar(y=labels, x=[r.get("size_gzip_mb") for r in rows], name="gzipped",
                orientation="h", marker_color="#93c5fd", customdata=names,
                hovertemplate="%{customdata}: %{x:.3f} MB gzipped<extra></extra>")
    fig.update_layout(barmode="group")
    _mark_baseline(fig, rows, "size_mb")
    fig = _layout(fig, "Size (raw and gzipped)", "MB", int(1.5 * len(rows)))
    fig.update_layout(showlegend=True, legend=dict(orientation="h", y=1.02, x=1,
                                                    xanchor="right", yanchor="bottom"))
    return fig


def pareto_points(rows: list[dict]) -> list[dict]:
    return [r for r in ok_rows(rows)
            if _num(r.get("accuracy")) is not None and _num(r.get("p50_ms")) is not None]


def pareto_front_of(rows: list[dict]) -> list[str]:
    """The variants no other beats on both accuracy and latency, by latency."""
    from benchmarks.report.results import pareto_front
    return pareto_front([(r["variant"], r["accuracy"], r["p50_ms"])
                         for r in pareto_points(rows)])


# Where a frontier label may go around its point, in order of preference, as plotly names
# them and as offsets of the label's centre in label widths and heights.
LABEL_SPOTS = (("top center", 0, 1), ("bottom center", 0, -1), ("middle right", 0.6, 0),
               ("middle left", -0.6, 0), ("top right", 0.6, 1), ("top left", -0.6, 1),
               ("bottom right", 0.6, -1), ("bottom left", -0.6, -1))
# The plot area assumed when placing labels: smaller than any the pages draw, so labels
# placed apart here are at least as far apart on the page.
PLOT_PX = (480.0, 260.0)
CHAR_PX, LINE_PX = 7.5, 16.0


def _label_positions(rows: list[dict], front: list[str]) -> dict[str, str]:
    """A position for each frontier variant's label such that no two labels (nor a label and
    a point) overlap; a frontier point with no free spot is named on hover only. Greedy, by
    latency, in pixels of an assumed plot area (plotly places no labels apart itself)."""
    by_name = {r["variant"]: r for r in rows}
    pts = [by_name[n] for n in front if n in by_name]
    if not pts:
        return {}
    xs = [r["p50_ms"] for r in rows]
    ys = [100 * r["accuracy"] for r in rows]
    lows = [100 * (_num(r.get("accuracy_ci_low")) or r["accuracy"]) for r in rows]
    highs = [100 * (_num(r.get("accuracy_ci_high")) or r["accuracy"]) for r in rows]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(lows), max(highs)
    xpad, ypad = 0.06 * ((x1 - x0) or 1.0), 0.06 * ((y1 - y0) or 1.0)
    x0, x1, y0, y1 = x0 - xpad, x1 + xpad, y0 - ypad, y1 + ypad

    def px(x, y):
        return ((x - x0) / (x1 - x0) * PLOT_PX[0], (y - y0) / (y1 - y0) * PLOT_PX[1])

    taken = [(cx - 6, cy - 6, cx + 6, cy + 6) for cx, cy in (px(x, y) for x, y in zip(xs, ys))]
    placed: dict[str, str] = {}
    for r in pts:
        cx, cy = px(r["p50_ms"], 100 * r["accuracy"])
        w, h = CHAR_PX * len(short(r["variant"])), LINE_PX
        for name, dx, dy in LABEL_SPOTS:
            left = cx + dx * w - w / 2 + (8 if dx > 0 else -8 if dx < 0 else 0)
            bottom = cy + dy * (h / 2 + 8) - h / 2
            box = (left, bottom, left + w, bottom + h)
            inside = box[0] >= -40 and box[2] <= PLOT_PX[0] + 40 and box[1] >= -20 and \
                box[3] <= PLOT_PX[1] + 30
            if inside and not any(_overlap(box, t) for t in taken
                                  if t != (cx - 6, cy - 6, cx + 6, cy + 6)):
                placed[r["variant"]] = name
                taken.append(box)
                break
    return placed


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def pareto_chart(rows: list[dict], front: list[str]) -> go.Figure:
    """Accuracy against latency, marker area proportional to size, the non-dominated
    variants (``front``, ordered by latency) joined by a line and labelled; the others are
    named on hover only, so labels never pile up."""
    rows = pareto_points(rows)
    sizes = [_num(r.get("size_mb")) or 0.0 for r in rows]
    biggest = max(sizes) if sizes and max(sizes) > 0 else 1.0
    # sizemode="area": marker area, not diameter, grows with the model's size.
    marker_size = [max(8.0, 40.0 * s / biggest) for s in sizes]
    on_front = set(front)
    err = [[100 * (r["accuracy"] - (_num(r.get("accuracy_ci_low")) or r["accuracy"])),
            100 * ((_num(r.get("accuracy_ci_high")) or r["accuracy"]) - r["accuracy"])]
           for r in rows]
    fig = go.Figure()
    positions = _label_positions(rows, front)
    fig.add_scatter(x=[r["p50_ms"] for r in rows], y=[100 * r["accuracy"] for r in rows],
                    mode="markers+text",
                    text=[short(r["variant"]) if r["variant"] in positions else ""
                          for r in rows],
                    textposition=[positions.get(r["variant"], "top center") for r in rows],
                    name="variants",
                    error_y=dict(type="data", symmetric=False, array=[e[1] for e in err],
                                 arrayminus=[e[0] for e in err], thickness=1, width=0,
                                 color="#9ca3af"),
                    marker=dict(size=marker_size, sizemode="area",
                                sizeref=2.0 * 40.0 / (40.0 ** 2),
                                color=[FRONT_COLOR if r["variant"] in on_front else
                                       (BASELINE_COLOR if is_baseline(r) else VARIANT_COLOR)
                                       for r in rows],
                                line=dict(width=[3 if r.get("noisy") else 0 for r in rows],
                                          color=NOISY_COLOR), opacity=0.8),
                    customdata=[[r["variant"], s] for r, s in zip(rows, sizes)],
                    hovertemplate="%{customdata[0]}<br>%{x:.3f} ms, %{y:.2f}%<br>"
                                  "%{customdata[1]:.3f} MB<extra></extra>")
    by_name = {r["variant"]: r for r in rows}
    pts = [by_name[n] for n in front if n in by_name]
    if pts:
        fig.add_scatter(x=[r["p50_ms"] for r in pts], y=[100 * r["accuracy"] for r in pts],
                        mode="lines", name="Pareto front", hoverinfo="skip",
                        line=dict(color=FRONT_COLOR, dash="dot"))
    fig.update_layout(title="Accuracy vs latency (marker area: size; green: Pareto front)",
                      height=CHART_HEIGHT + 80, margin=dict(l=10, r=10, t=40, b=10),
                      xaxis_title="p50 latency (ms per batch)", yaxis_title="accuracy (%)",
                      showlegend=False)
    return fig


# -- trade-off curves: one figure per swept setting ----------------------------------------

def swept_axes(rows: list[dict]) -> list[str]:
    """The settings swept in these rows (those with more than one value)."""
    values = defaultdict(set)
    for r in rows:
        for k, v in r.items():
            if k.startswith("axis:") and v is not None:
                values[k[5:]].add(v if not isinstance(v, list) else tuple(v))
    return sorted(a for a, vs in values.items() if len(vs) > 1)


CURVE_FIGURES = (("accuracy", "accuracy (%)", 100.0), ("p50_ms", "p50 (ms per batch)", 1.0),
                 ("size_mb", "size (MB)", 1.0))


def curve_chart(rows: list[dict], axis: str) -> go.Figure:
    """Accuracy, p50 latency and size against one swept setting, one line per combination of
    the other settings swept with it (e.g. per pruning method), the baseline as a reference
    line, failed points marked with a red cross."""
    from plotly.subplots import make_subplots
    key = f"axis:{axis}"
    points = [r for r in rows if r.get(key) is not None]
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
    numeric = all(isinstance(r.get(key), (int, float)) for r in points)
    for g, (label, members) in enumerate(sorted(groups.items())):
        members = sorted(members, key=lambda r: r[key] if numeric else str(r[key]))
        color = PALETTE[g % len(PALETTE)]
        for col, (figure, _, scale) in enumerate(CURVE_FIGURES, start=1):
            good = [r for r in members if not r.get("error") and _num(r.get(figure)) is not None]
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
            if base is not None and _num(base.get(figure)) is not None:
                note = {"annotation_text": "baseline"} if g == 0 else {}
                fig.add_hline(y=base[figure] * scale, line_dash="dash",
                              line_color=BASELINE_COLOR, row=1, col=col, **note)
    fig.update_xaxes(title=axis)
    fig.update_layout(title=f"Trade-off against {axis}", height=CHART_HEIGHT + 40,
                      margin=dict(l=10, r=10, t=60, b=10),
                      legend=dict(orientation="h", y=-0.25))
    return fig


def _varies(points: list[dict], key: str) -> bool:
    return len({str(r.get(key)) for r in points}) > 1


def _curve_error(rows: list[dict]) -> dict | None:
    if not any(_num(r.get("accuracy_ci_low")) is not None for r in rows):
        return None
    return dict(type="data", symmetric=False, thickness=1, width=3,
                array=[100 * ((_num(r.get("accuracy_ci_high")) or r["accuracy"]) - r["accuracy"])
                       for r in rows],
                arrayminus=[100 * (r["accuracy"] - (_num(r.get("accuracy_ci_low"))
                                                    or r["accuracy"])) for r in rows])


def _failed_y(rows: list[dict], figure: str, scale: float) -> float:
    """Where a failed point is drawn: at the bottom of what the others span."""
    values = [r[figure] * scale for r in rows if _num(r.get(figure)) is not None]
    return min(values) if values else 0.0


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


# -- the roofline ----------------------------------------------------------------------------

PRECISION_COLORS = {"fp32": "#2563eb", "tf32": "#0891b2", "bf16": "#9333ea", "fp16": "#db2777",
                    "int8": "#ea580c"}
GIGA = 1e9


def roofline_points(rows: list[dict]) -> list[dict]:
    return [r for r in ok_rows(rows) if _num(r.get("achieved_flops_per_s")) is not None
            and _num(r.get("arithmetic_intensity")) is not None]


def roofline_chart(rows: list[dict], peaks: dict) -> go.Figure:
    """Log-log: FLOP/s against arithmetic intensity (FLOPs per byte moved). Each device's
    memory roof (its copy bandwidth times the intensity) meets a flat compute roof per
    precision (its GEMM peak); one point per variant, coloured by the precision it ran in.
    A point far below its roof leaves the kernels idle (small or irregular shapes, launch
    overhead); one under the slanted roof is memory-bound."""
    from benchmarks.measure.roofline import ridge_point
    points = roofline_points(rows)
    devices = [d for d in dict.fromkeys(r.get("device") for r in points) if d in peaks]
    xs = [r["arithmetic_intensity"] for r in points]
    ridges = [ridge_point(p, peaks[d]["memory_bytes_per_s"]) for d in devices
              for p in peaks[d]["gemm_flops_per_s"].values()]
    low = min(xs + ridges, default=1.0) / 4
    high = max(xs + ridges, default=10.0) * 4
    fig = go.Figure()
    for n, device in enumerate(devices):
        bandwidth = peaks[device]["memory_bytes_per_s"]
        dash = "solid" if n == 0 else "dash"
        for precision, peak in peaks[device]["gemm_flops_per_s"].items():
            ridge = ridge_point(peak, bandwidth)
            label = f"{device} {precision}" if len(devices) > 1 else precision
            fig.add_scatter(x=[low, ridge, high], y=[low * bandwidth / GIGA, peak / GIGA,
                                                     peak / GIGA],
                            mode="lines", name=f"{label} roof",
                            line=dict(color=PRECISION_COLORS.get(precision, BASELINE_COLOR),
                                      width=1.5, dash=dash),
                            hovertemplate=f"{label}: peak {peak / GIGA:,.1f} GFLOP/s, "
                                          f"{bandwidth / GIGA:,.1f} GB/s<extra></extra>")
    # One trace per variant, so the legend names each point (labels on the chart pile up
    # where variants share an intensity); the colour says its precision.
    symbols = ("circle", "square", "triangle-up", "x", "star", "cross", "triangle-down", "hexagon")
    for n, r in enumerate(points):
        fig.add_scatter(
            x=[r["arithmetic_intensity"]], y=[r["achieved_flops_per_s"] / GIGA], mode="markers",
            name=f"{short(r['variant'])} ({r.get('precision')})",
            marker=dict(size=12, color=PRECISION_COLORS.get(r.get("precision"), VARIANT_COLOR),
                        symbol="diamond" if is_baseline(r) else symbols[n % len(symbols)],
                        line=dict(width=1, color="#111827")),
            customdata=[[r["variant"], _num(r.get("percent_of_peak")) or 0.0,
                         r.get("bound") or "-", r.get("device")]],
            hovertemplate="%{customdata[0]} (%{customdata[3]})<br>%{y:,.2f} GFLOP/s at "
                          "%{x:.2f} FLOP/byte<br>%{customdata[1]:.1f}% of the peak; "
                          "%{customdata[2]}-bound<extra></extra>")
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOPs per byte moved)")
    fig.update_yaxes(type="log", title="GFLOP/s")
    fig.update_layout(title="Roofline: achieved FLOP/s against the measured roofs",
                      height=CHART_HEIGHT + 140, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", y=-0.25))
    return fig


# -- every chart of a run ------------------------------------------------------------------------

FOUR = ("accuracy", "latency", "memory", "size")


def run_figures(report, rows: list[dict] | None = None) -> dict[str, go.Figure]:
    """Every chart of one sweep (a ``RunReport``), in reading order, by name: the four figures
    side by side, a trade-off curve per swept setting (``curve:<axis>``), Pareto, the roofline
    (where the device's peaks were measured), per-layer sparsity of pruned variants. The
    Results page draws them and the HTML report holds them: one list, so the two agree."""
    rows = report.rows() if rows is None else rows
    figs: dict[str, go.Figure] = {}
    if not ok_rows(rows):
        return figs
    figs.update(accuracy=accuracy_chart(rows), latency=latency_chart(rows),
                memory=memory_chart(rows), size=size_chart(rows))
    for axis in swept_axes(rows):
        figs[f"curve:{axis}"] = curve_chart(rows, axis)
    front = pareto_front_of(rows)
    if front:
        figs["pareto"] = pareto_chart(rows, front)
    if report.peaks and roofline_points(rows):
        figs["roofline"] = roofline_chart(rows, report.peaks)
    pruned = {v.name: v.layer_sparsity for v in report.variants
              if v.layer_sparsity and "prune" in v.techniques}
    if pruned:
        figs["sparsity"] = sparsity_chart(pruned)
    return figs


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
