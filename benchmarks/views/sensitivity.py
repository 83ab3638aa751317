"""The sensitivity map's views, from its cells (``sensitivity.record.MapCell``; torch-free,
Streamlit-free): the heatmap of
groups x levels coloured by the lower bound of each cell's paired interval (cells whose
interval crosses zero hatched: within noise), the scatter of accuracy change against the
group's share of the latency, a variant's per-layer SQNR, and for a sweep that applied a
schedule its map's prediction beside what was measured.

Every figure has its data function (``heatmap_data``...), which the tests read.
"""

from __future__ import annotations

import plotly.graph_objects as go

from benchmarks.report.chart_text import Markup
from benchmarks.report import stats
from benchmarks.report.style import CHART_HEIGHT, FAILED_COLOR, PALETTE, short
from benchmarks.sensitivity.record import MapCell

HATCH = "/"                 # a cell within noise
MISSING_COLOR = "#d1d5db"   # a cell that failed
# Red for a loss, white for none, blue for a gain: centred on zero whatever the data.
DIVERGING = [[0.0, "#b91c1c"], [0.5, "#f9fafb"], [1.0, "#1d4ed8"]]


def _groups_by_sensitivity(cells: list[MapCell]) -> list[str]:
    """Group roots, most sensitive first (by their worst interval lower bound)."""
    worst: dict[str, float] = {}
    for c in cells:
        low = c.accuracy_change_ci[0] if c.accuracy_change_ci else float("inf")
        worst[c.root] = min(worst.get(c.root, float("inf")), low)
    return sorted(worst, key=lambda g: (worst[g], g))


def _cell_text(c: MapCell | None) -> str:
    if c is None:
        return ""
    if c.error:
        return "failed"
    ci = c.accuracy_change_ci
    return "" if not ci else f"{c.accuracy_change:+.2f} [{ci[0]:+.2f}, {ci[1]:+.2f}]"


def heatmap_data(cells: list[MapCell]) -> dict:
    """{"groups" (most sensitive first), "levels", "lower" (the interval's lower bound in
    points, None where a cell failed), "hatched" (its interval crosses zero), "text"}, each a
    groups x levels grid."""
    groups = _groups_by_sensitivity(cells)
    levels = sorted({c.level for c in cells})
    at = {(c.root, c.level): c for c in cells}
    lower, hatched, text = [], [], []
    for g in groups:
        lower.append([]), hatched.append([]), text.append([])
        for level in levels:
            c = at.get((g, level))
            ci = c.accuracy_change_ci if c else None
            lower[-1].append(None if c is None or c.error or not ci else ci[0])
            hatched[-1].append(c is not None and c.within_noise)
            text[-1].append(_cell_text(c))
    return {"groups": groups, "levels": levels, "lower": lower, "hatched": hatched,
            "text": text}


def heatmap(cells: list[MapCell],
            title: str = "Where accuracy goes: groups x levels") -> go.Figure:
    """Cells drawn as unit bars (a plotly heatmap cannot hatch): one trace per level, each
    group a bar at its row, coloured by the interval's lower bound on one shared colour axis,
    hatched where the interval crosses zero."""
    data = heatmap_data(cells)
    values = [v for row in data["lower"] for v in row if v is not None]
    span = max([abs(v) for v in values] + [1.0])
    fig = go.Figure()
    for j, level in enumerate(data["levels"]):
        column = [row[j] for row in data["lower"]]
        fig.add_trace(go.Bar(
            x=[f"{level:g}"] * len(data["groups"]), y=[1] * len(data["groups"]),
            base=list(range(len(data["groups"]))), width=0.94,
            marker=dict(color=[MISSING_COLOR if v is None else v for v in column],
                        coloraxis="coloraxis",
                        pattern=dict(shape=[HATCH if h else "" for h in
                                            (row[j] for row in data["hatched"])],
                                     fgcolor="#374151", size=7, solidity=0.25),
                        line=dict(width=0)),
            customdata=[[g, t] for g, t in zip(data["groups"],
                                              (row[j] for row in data["text"]))],
            hovertemplate="%{customdata[0]} at %{x}: %{customdata[1]} pts<extra></extra>",
            name=f"level {level:g}"))
    fig.update_layout(
        title=title, barmode="overlay", bargap=0.05, showlegend=False,
        height=max(CHART_HEIGHT, 100 + 26 * len(data["groups"])),
        margin=dict(l=10, r=10, t=60, b=10),
        coloraxis=dict(colorscale=DIVERGING, cmin=-span, cmax=span,
                       colorbar=dict(title=Markup("lower bound<br>Δ pts"))))
    fig.update_xaxes(title="level (fraction removed; INT8: quantized)", type="category")
    fig.update_yaxes(tickvals=[i + 0.5 for i in range(len(data["groups"]))],
                     ticktext=[short(g) for g in data["groups"]], autorange="reversed",
                     range=[len(data["groups"]) + 0.03, -0.03], automargin=True, title=None)
    fig.add_annotation(text="hatched: within noise (the interval crosses zero)",
                       xref="paper", yref="paper", x=0, y=1.02, yanchor="bottom",
                       showarrow=False, font=dict(size=11))
    return fig


def scatter_data(cells: list[MapCell]) -> list[dict]:
    """One point per measured cell: its group's latency share (%), its accuracy change and
    interval (points), its level."""
    return [{"root": c.root, "level": c.level, "share_pct": 100 * c.latency_share,
             "change": c.accuracy_change, "low": c.accuracy_change_ci[0],
             "high": c.accuracy_change_ci[1]}
            for c in cells
            if c.measured and c.accuracy_change_ci and c.latency_share is not None]


def scatter(cells: list[MapCell]) -> go.Figure:
    """Accuracy change against the group's share of the latency, a colour per level: the
    cheap wins sit top right (much time, little loss)."""
    points = scatter_data(cells)
    fig = go.Figure()
    for i, level in enumerate(sorted({p["level"] for p in points})):
        mine = [p for p in points if p["level"] == level]
        fig.add_trace(go.Scatter(
            x=[p["share_pct"] for p in mine], y=[p["change"] for p in mine], mode="markers",
            name=f"level {level:g}", marker=dict(size=9, color=PALETTE[i % len(PALETTE)]),
            error_y=dict(type="data", symmetric=False,
                         array=[p["high"] - p["change"] for p in mine],
                         arrayminus=[p["change"] - p["low"] for p in mine], thickness=1),
            text=[p["root"] for p in mine],
            hovertemplate="%{text}: %{x:.1f}% of the latency, %{y:+.2f} pts<extra></extra>"))
    fig.add_hline(y=0, line_dash="dash", line_color="#6b7280")
    fig.update_layout(title=dict(text="Accuracy change against latency share", y=0.97),
                      height=CHART_HEIGHT + 60,
                      margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom", xanchor="left"))
    fig.update_xaxes(title="the group's share of the baseline's latency (%)")
    fig.update_yaxes(title="Δ accuracy (pts, paired 95% interval)")
    return fig


def layers_chart(diagnostics: dict, title: str) -> go.Figure:
    """A variant's per-layer SQNR against the baseline (dB; higher is closer)."""
    layers = diagnostics.get("layers") or []
    fig = go.Figure(go.Bar(
        x=[short(r["layer"]) for r in layers], y=[r["sqnr_db"] for r in layers],
        customdata=[[r["layer"], r["cosine"]] for r in layers],
        marker_color=[FAILED_COLOR if (r["sqnr_db"] or 0) < 10 else PALETTE[0]
                      for r in layers],
        hovertemplate="%{customdata[0]}: %{y:.1f} dB, cosine %{customdata[1]:.4f}"
                      "<extra></extra>"))
    fig.update_layout(title=title, height=CHART_HEIGHT, margin=dict(l=10, r=10, t=40, b=10),
                      showlegend=False)
    fig.update_yaxes(title="SQNR vs baseline (dB)")
    # Layers as categories, whatever their names look like (seed_cnn's "0", "2", "5" were a
    # -1...6 axis; issue 32.7).
    fig.update_xaxes(type="category")
    return fig


def schedule_checks(variants: list, baseline: str | None, confidence: float = 0.95
                    ) -> list[dict]:
    """For each variant that applied a map's schedule: the map's predicted accuracy change
    beside the measured one, with the same paired interval (Tango's, on the same test
    examples) and whether it stays within the schedule's budget; the predicted latency
    saving beside the measured one (p50 against the baseline's, its interval from the
    bootstrap over the run's interleaved rounds); and the fine-tuning the prediction assumed
    beside the one applied. ``variants``: the run's ``VariantResult``s."""
    base = next((v for v in variants if v.name == baseline), None)
    out = []
    for v in variants:
        schedule = _schedule_of(v.config)
        if schedule is None or base is None or not v.ok:
            continue
        row = {"variant": v.name, "technique": schedule["technique"],
               "predicted_pts": (schedule.get("predicted") or {}).get("accuracy_change_pts"),
               "max_drop_pts": schedule.get("max_drop_pts"), "measured_pts": None,
               "measured_ci": None, "p_value": None, "within_budget": None,
               "predicted_saving": (schedule.get("predicted") or {}).get("saving"),
               "measured_saving": None, "measured_saving_ci": None,
               "predicted_finetune_epochs": schedule.get("finetune_epochs"),
               "finetune_epochs": (v.config.get("prune") or {}).get("finetune_epochs")}
        row["same_finetuning"] = (None if row["predicted_finetune_epochs"] is None
                                  else row["predicted_finetune_epochs"]
                                  == row["finetune_epochs"])
        row.update(_saving(v, base))
        if v.scores.correct_bits and base.scores.correct_bits and \
                v.scores.n_test == base.scores.n_test:
            mine = stats.unpack_bits(v.scores.correct_bits, v.scores.n_test)
            ref = stats.unpack_bits(base.scores.correct_bits, base.scores.n_test)
            b, c = stats.discordant(mine, ref)
            # The interval and the p-value from one test (they never disagree).
            test = stats.paired_difference(b, c, v.scores.n_test, confidence)
            row.update(measured_pts=test["difference_pts"], measured_ci=test["ci_pts"],
                       p_value=test["p_value"])
            if row["max_drop_pts"] is not None:
                row["within_budget"] = row["measured_pts"] >= -row["max_drop_pts"]
        out.append(row)
    return out


def _saving(variant, base) -> dict:
    """The fraction of the baseline's p50 the variant saves, with the interval of the paired
    rounds' bootstrap where both were timed in the same rounds."""
    mine, ref = variant.timing.latency, base.timing.latency
    if mine is None or ref is None or not ref.p50:
        return {}
    out = {"measured_saving": 1.0 - mine.p50 / ref.p50}
    if variant.timing.round_p50_ms and base.timing.round_p50_ms:
        boot = stats.bootstrap_ratio([[x] for x in base.timing.round_p50_ms],
                                     [[x] for x in variant.timing.round_p50_ms])
        if boot and boot["ci"]:
            out["measured_saving_ci"] = [1.0 - 1.0 / c for c in boot["ci"]]
    return out


def _schedule_of(config: dict) -> dict | None:
    for part in (config or {}).values():
        schedule = part.get("schedule") if isinstance(part, dict) else None
        if isinstance(schedule, dict) and "groups" in schedule:
            return schedule
    return None
