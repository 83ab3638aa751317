"""What every chart shares: colours, the layout, labels that fit an axis, which row is the
baseline. Figures only: no Streamlit, no torch.

Colours read on a light and a dark page alike: mid-tones for marks and lines (``INK`` for
whiskers and outlines, never near-black), and no colour for text at all: titles, ticks,
legends and annotations take the font colour of the template they are drawn with (the
Results page draws with Streamlit's theme, light or dark as the browser asks; the HTML report
with plotly's light one)."""

from __future__ import annotations

import math
from collections import defaultdict

import plotly.graph_objects as go

from benchmarks.report.formats import number

BASELINE_COLOR = "#6b7280"
INK = "#8b93a1"              # whiskers, outlines: a grey with contrast on white and on black
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


# A finite number or None: the one test of what counts as a figure (formats.number).
num = number


def is_baseline(row: dict) -> bool:
    if "is_baseline" in row:
        return bool(row["is_baseline"])
    return row.get("techniques") in ("-", "", None)


def ok_rows(rows: list[dict]) -> list[dict]:
    """The measured rows: neither failed nor n/a (a profile's cell it could not preview)."""
    return [r for r in rows if not r.get("error") and not r.get("not_applicable")]


def short(name: str, limit: int = SHORT_LABEL) -> str:
    """A name that fits an axis: long chained names keep their start and end."""
    if len(name) <= limit:
        return name
    keep = (limit - 1) // 2
    return f"{name[:keep]}…{name[-(limit - 1 - keep):]}"


def axis_labels(rows: list[dict]) -> list[str]:
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


def layout(fig: go.Figure, title: str, axis_title: str, n: int) -> go.Figure:
    fig.update_layout(title=title, height=max(CHART_HEIGHT, 90 + 22 * n),
                      margin=dict(l=10, r=10, t=40, b=10), showlegend=False, bargap=0.25)
    fig.update_xaxes(title=axis_title)
    # A category axis whatever the names look like: layers of an nn.Sequential are named
    # "0", "2", "5", which plotly would otherwise place on a numeric -1...6 axis.
    fig.update_yaxes(type="category", autorange="reversed", automargin=True)  # first on top
    return fig


def _tick_text(value: float) -> str:
    """A tick's label in full: 0.01, 1, 10, 2k (never plotly's lone "2" or "5")."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:.12f}".rstrip("0").rstrip(".")


def log_ticks(low: float, high: float) -> dict:
    """Ticks of a log axis over [low, high] (positive): the decades (1, 10, 100), and where
    fewer than three decades fall inside, 2 and 5 times them too; each labelled in full. The
    keywords of ``update_xaxes``/``update_yaxes``."""
    if not (low > 0 and high >= low):
        return {}
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    decades = [10.0 ** e for e in range(first, last + 1)]
    inside = [d for d in decades if low <= d <= high]
    steps = (1,) if len(inside) >= 3 else (1, 2, 5)
    values = [d * s for d in decades for s in steps if low <= d * s <= high]
    if len(values) < 2:  # a range inside one step: its ends, labelled
        values = sorted({low, high})
    return dict(type="log", tickmode="array", tickvals=values,
                ticktext=[_tick_text(v) for v in values])


def keep_order(fig: go.Figure, labels: list[str]) -> None:
    """The variants in the rows' order down the axis, whichever trace each is drawn in."""
    fig.update_yaxes(categoryorder="array", categoryarray=labels)


def with_legend(fig: go.Figure) -> go.Figure:
    """The legend under the chart, in one or two lines: what each marker or pattern says."""
    fig.update_layout(showlegend=True, height=fig.layout.height + 44,
                      legend=dict(orientation="h", yref="container", y=0, yanchor="bottom",
                                  x=0, xanchor="left", font=dict(size=11)))
    return fig


def bar_colors(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        if is_baseline(r):
            out.append(BASELINE_COLOR)
        elif r.get("within_noise"):
            out.append(NOISE_COLOR)
        else:
            out.append(VARIANT_COLOR)
    return out


def mark_baseline(fig: go.Figure, rows: list[dict], key: str, scale: float = 1.0) -> None:
    """A dashed line at the baseline's value, so every bar reads against it."""
    base = next((r for r in rows if is_baseline(r)), None)
    value = num(base.get(key)) if base else None
    if value is not None:
        fig.add_vline(x=value * scale, line_dash="dash", line_color=BASELINE_COLOR,
                      annotation_text="baseline", annotation_position="top")
