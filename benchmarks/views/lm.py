"""A language model's run as a reader sees it: its answer (the fastest variant whose quality
change is within noise) and its table, from the stored variant records
(``benchmarks.run.lm_runner.LMVariant.to_dict``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the record is read lazily: a run without a recommendation never needs it
    from benchmarks.recommend.record import Recommended


@dataclass(frozen=True)
class LMAnswer:
    """The fastest cell, among variants whose NLL change's interval holds zero (within noise:
    not shown equal; `recommend` certifies a margin), by decode speed-up over the baseline in
    the same mode, counted faster only where the speed-up's interval lies above 1."""
    variant: str | None
    mode: str | None
    decode_speedup: float | None
    speedup_interval: list | None
    delta_nll: float | None
    delta_nll_interval: list | None
    line: str
    threads: int | None = None  # the cells' thread count (None: a record from before it)

    def to_dict(self) -> dict:
        return asdict(self)


def _cells(variants: list[dict]):
    for v in variants:
        for cell in v.get("cells") or ():
            if cell.get("ok"):
                yield v, cell


def lm_answer(variants: list[dict]) -> LMAnswer:
    baseline = variants[0]["name"] if variants else None
    within = [(v, c) for v, c in _cells(variants)
              if v["name"] != baseline and v.get("quality")
              and v["quality"].get("nll_within_noise") and c.get("decode_speedup")]
    faster = [(v, c) for v, c in within
              if (c["decode_speedup"].get("ci") or [0])[0] > 1]
    threads = _threads(variants)
    # A decode speed-up holds at the thread count it was timed on: named beside the kernels.
    count = "" if threads is None else f"{threads} thread{'s' if threads != 1 else ''}"
    if not faster:
        kernels = sorted({_kernel(v) for v, _ in _cells(variants)
                          if v["name"] != baseline and _kernel(v)})
        why = f" (kernels that ran: {', '.join(kernels)})" if kernels else ""
        others = [v for v in variants if v["name"] != baseline and v.get("ok")]
        if not others:
            reason = "no variant besides the baseline was built"
        elif not within:
            reason = "no variant's NLL change is within noise of zero"
        else:
            reason = (f"of the {len(within)} cell(s) whose variant's NLL change is within "
                      f"noise, none decodes faster than the baseline in its mode beyond the "
                      f"speed-up's interval on this CPU{' at ' + count if count else ''}{why}")
        return LMAnswer(None, None, None, None, None, None, f"No faster variant: {reason}.",
                        threads)
    v, c = max(faster, key=lambda vc: vc[1]["decode_speedup"]["ratio"])
    q, s = v["quality"], c["decode_speedup"]
    how = ", ".join(filter(None, (c["mode"], count)))
    line = (f"{v['name']} ({how}): decodes {s['ratio']:.2f}x the baseline's speed "
            f"[{s['ci'][0]:.2f}, {s['ci'][1]:.2f}], NLL change {q['delta_nll']:+.4f} per token "
            f"[{q['delta_nll_interval'][0]:+.4f}, {q['delta_nll_interval'][1]:+.4f}] "
            f"(within noise: its interval holds 0)")
    return LMAnswer(v["name"], c["mode"], s["ratio"], s["ci"], q["delta_nll"],
                    q["delta_nll_interval"], line, threads)


def _threads(variants: list[dict]) -> int | None:
    """The thread count the cells were timed on (one per run)."""
    counts = {c["threads"] for _, c in _cells(variants) if c.get("threads")}
    return counts.pop() if len(counts) == 1 else None


def _kernel(variant: dict) -> str | None:
    for technique in ("int4", "int8"):
        kernel = (variant.get("config") or {}).get(technique, {}).get("weights")
        if kernel:
            return f"{technique} {kernel}"
    return None


HEADER = ("variant", "mode", "ppl", "dNLL/token [95%]", "agree", "KL mean", "prefill ms",
          "decode ms/tok", "tok/s", "decode x [95%]", "peak MB", "weights MB")


def lm_table(variants: list[dict]) -> str:
    """One row per cell (variant x mode), a failed variant or cell with its cause; then the
    notes."""
    rows = [HEADER, *lm_cells(variants)]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(HEADER))]
    return "\n".join(["  ".join(str(cell).ljust(w) for cell, w in zip(r, widths)).rstrip()
                      for r in rows] + [f"note: {n}" for n in lm_notes(variants)])


def lm_cells(variants: list[dict]) -> list[tuple]:
    """The table's rows as formatted cells, HEADER's columns."""
    rows = []
    for v in variants:
        if not v["ok"]:
            rows.append((v["name"], "-", f"failed: {v['error']}") + ("",) * (len(HEADER) - 3))
            continue
        q, size = v.get("quality") or {}, v.get("size") or {}
        quality = (_num(q.get("variant", {}).get("perplexity"), ".2f"),
                   _interval(q.get("delta_nll"), q.get("delta_nll_interval"), "+.4f"),
                   _num(q.get("agreement"), ".1%"), _num(q.get("kl_mean"), ".4f"))
        weights = _num((size.get("weights_bytes") or 0) / 1e6, ".2f")
        for c in v.get("cells") or [{"mode": "-", "ok": False, "error": "not timed"}]:
            if not c.get("ok"):
                rows.append((v["name"], c["mode"], *quality, f"failed: {c['error']}",
                             "", "", "", "", weights))
                continue
            s = c.get("decode_speedup") or {}
            rows.append((v["name"], c["mode"], *quality, _num(c.get("prefill_ms"), ".1f"),
                         _num(c.get("decode_ms_per_token"), ".2f"),
                         _num(c.get("tokens_per_s"), ".1f"),
                         _interval(s.get("ratio"), s.get("ci"), ".2f"),
                         _num((c.get("peak_bytes") or 0) / 1e6, ".1f"), weights))
    return rows


def lm_notes(variants: list[dict]) -> list[str]:
    """What a variant's name does not say: the layers a quantization left float."""
    notes = []
    for v in variants:
        for technique in ("int4", "int8"):
            config = (v.get("config") or {}).get(technique) or {}
            if config.get("float_layers"):
                total = config["layers"] + config["float_layers"]
                why = (f": their input width ({', '.join(map(str, config['float_widths']))}) "
                       f"is not a multiple of the group size {config['group_size']}"
                       if config.get("float_widths") else "")
                notes.append(f"{v['name']}: {config['float_layers']} of {total} linear layers "
                             f"stay float{why}")
    return notes


def _num(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _interval(value, ci, spec: str) -> str:
    if value is None:
        return "-"
    if not ci:
        return format(value, spec)
    return f"{value:{spec}} [{ci[0]:{spec}}, {ci[1]:{spec}}]"


def lm_rows(variants: list[dict]) -> list[dict]:
    """One row per cell (variant x mode) for a page's table, its columns in reading order:
    which cell, its variant's quality, its speed, its memory and size; a failed variant or
    cell keeps its row, with its cause."""
    rows = []
    for v in variants:
        q, size = v.get("quality") or {}, v.get("size") or {}
        interval = q.get("delta_nll_interval") or [None, None]
        quality = {"Perplexity": (q.get("variant") or {}).get("perplexity"),
                   "dNLL/token": q.get("delta_nll"), "dNLL 95% low": interval[0],
                   "dNLL 95% high": interval[1], "Within noise": q.get("nll_within_noise"),
                   "Agreement": q.get("agreement"), "KL mean": q.get("kl_mean")}
        weights = (size.get("weights_bytes") or 0) / 1e6 or None
        cells = v.get("cells") or []
        if not v.get("ok") or not cells:
            rows.append({"Variant": v["name"], "Mode": None, **quality, "Weights MB": weights,
                         "Error": v.get("error") or "not timed"})
            continue
        for c in cells:
            s = c.get("decode_speedup") or {}
            ci = s.get("ci") or [None, None]
            rows.append({"Variant": v["name"], "Mode": c["mode"], **quality,
                         "Decode speed-up": s.get("ratio"), "Speed-up 95% low": ci[0],
                         "Speed-up 95% high": ci[1],
                         "Decode ms/token": c.get("decode_ms_per_token"),
                         "Tokens/s": c.get("tokens_per_s"), "Prefill ms": c.get("prefill_ms"),
                         "Peak MB": (c.get("peak_bytes") or 0) / 1e6 or None,
                         "Weights MB": weights,
                         "Error": None if c.get("ok") else c.get("error")})
    return rows


def lm_tradeoff_figure(variants: list[dict]):
    """Each timed cell: its decode speed-up over the baseline in the same mode against its
    variant's NLL change per token, both with their 95% intervals; the baseline's lines
    (speed-up 1, change 0) dashed."""
    import plotly.graph_objects as go
    fig = go.Figure()
    rows = [r for r in lm_rows(variants) if r.get("Decode speed-up") is not None
            and r.get("dNLL/token") is not None]
    for mode in sorted({r["Mode"] for r in rows}):
        mine = [r for r in rows if r["Mode"] == mode]
        fig.add_trace(go.Scatter(
            x=[r["Decode speed-up"] for r in mine], y=[r["dNLL/token"] for r in mine],
            mode="markers+text", text=[r["Variant"] for r in mine], textposition="top center",
            name=mode,
            error_x=dict(type="data", symmetric=False,
                         array=[_up(r["Speed-up 95% high"], r["Decode speed-up"]) for r in mine],
                         arrayminus=[_up(r["Decode speed-up"], r["Speed-up 95% low"])
                                     for r in mine]),
            error_y=dict(type="data", symmetric=False,
                         array=[_up(r["dNLL 95% high"], r["dNLL/token"]) for r in mine],
                         arrayminus=[_up(r["dNLL/token"], r["dNLL 95% low"]) for r in mine])))
    fig.add_hline(y=0, line_dash="dash", line_color="grey")
    fig.add_vline(x=1, line_dash="dash", line_color="grey")
    fig.update_layout(xaxis_title="decode speed-up over the baseline in the same mode (x)",
                      yaxis_title="NLL change per token (nats; lower is better)",
                      legend_title="mode", margin=dict(t=30))
    return fig


def _up(high, value) -> float:
    return 0.0 if high is None or value is None else max(0.0, high - value)


def render_lm_html(run: dict) -> str:
    """A language model's stored run as one self-contained HTML file (plotly embedded, nothing
    loaded over the network): the answer, every cell with its intervals, the notes, the
    speed/quality chart, the text's record and the environment."""
    import json

    import plotly.offline

    from benchmarks.report.figures import PLOTLY_CONFIG
    from benchmarks.views.html import (_environment_rows, _figure_json, _script_json,
                                        report_template)
    variants = run.get("variants") or []
    figures, template = [], {}
    named = [("lm-tradeoff", None, lm_tradeoff_figure(variants))] + [
        (f"lm-curve-{axis}", axis, lm_curve_figure(axis, points))
        for axis, points in lm_curves(variants).items()]
    for name, title, fig in named:
        data, template = _figure_json(fig)
        figures.append({"id": f"chart-{len(figures)}", "name": name, "title": title,
                        "json": _script_json(data)})
    heads, rows = HEADER, lm_cells(variants)
    page = report_template("lm_report.html")
    text = (run.get("environment") or {}).get("text") or {}
    options = (run.get("spec") or {}).get("lm") or {}
    measurement = (f"{text.get('windows', '?')} windows of {text.get('window', '?')} tokens "
                   f"({text.get('search_windows', 0) + text.get('certify_windows', 0)} scored, "
                   f"{text.get('calibration_windows', '?')} for calibration); intervals: a "
                   f"percentile bootstrap over windows, 95%. Generation: "
                   f"{options.get('prompt_tokens', '?')} prompt tokens, "
                   f"{options.get('new_tokens', '?')} new, greedy, batch 1; speed-ups against "
                   f"the baseline in the same mode, an interval over interleaved rounds.")
    certificate = None
    if run.get("recommendation"):  # `recommend` on it: the certificate, as the CLI says it
        from benchmarks.recommend.record import Recommended
        from benchmarks.views.recommendation import CANDIDATE_COLUMNS, candidate_rows
        rec = Recommended.from_dict(run["recommendation"])
        certificate = {"winner": rec.certificate.winner, "lines": lm_recommend_lines(rec),
                       "heads": CANDIDATE_COLUMNS, "rows": candidate_rows(rec)}
    return page.render(
        run={**run, "environment": run.get("environment") or {}}, certificate=certificate,
        title=f"{run.get('model')} on {run.get('dataset')}", answer=lm_answer(variants),
        heads=heads, rows=rows, notes=lm_notes(variants), measurement=measurement,
        figures=figures, template_json=_script_json(template),
        config_json=_script_json({**PLOTLY_CONFIG, "responsive": True}),
        plotly_js=plotly.offline.get_plotlyjs(),
        environment=_environment_rows({k: v for k, v in (run.get("environment") or {}).items()
                                       if k != "model"} | {"model": json.dumps(
                                           (run.get("environment") or {}).get("model"),
                                           default=str)}))



def lm_curves(variants: list[dict]) -> dict[str, list[dict]]:
    """{swept setting: its points in order}, for each setting a sweep gave two or more values
    (``prune.ratio``, ``int4.group_size``): each point the variant's NLL change and, per mode,
    its decode speed-up, both with their intervals."""
    points: dict[str, list[dict]] = {}
    for v in variants:
        q = v.get("quality") or {}
        if not v.get("ok") or not q:
            continue
        for axis, value in (v.get("axes") or {}).items():
            points.setdefault(axis, []).append({
                "value": value, "variant": v["name"], "delta_nll": q.get("delta_nll"),
                "delta_nll_interval": q.get("delta_nll_interval"),
                "speedups": {c["mode"]: c.get("decode_speedup") for c in v.get("cells") or []
                             if c.get("ok") and c.get("decode_speedup")}})
    return {axis: sorted(p, key=lambda point: point["value"]) for axis, p in points.items()
            if len({point["value"] for point in p}) > 1}


def lm_curve_figure(axis: str, points: list[dict]):
    """One swept setting's curve: the NLL change per token (left axis) and each mode's decode
    speed-up (right axis) against the setting's value, with their 95% intervals."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    xs = [p["value"] for p in points]
    lows = [(p["delta_nll_interval"] or [None, None])[0] for p in points]
    highs = [(p["delta_nll_interval"] or [None, None])[1] for p in points]
    nll = [p["delta_nll"] for p in points]
    fig.add_trace(go.Scatter(
        x=xs, y=nll, mode="lines+markers", name="NLL change per token",
        error_y=dict(type="data", symmetric=False, array=[_up(h, y) for h, y in zip(highs, nll)],
                     arrayminus=[_up(y, lo) for y, lo in zip(nll, lows)])), secondary_y=False)
    for mode in sorted({m for p in points for m in p["speedups"]}):
        mine = [(p["value"], p["speedups"][mode]) for p in points if mode in p["speedups"]]
        ys = [s["ratio"] for _, s in mine]
        cis = [s.get("ci") or [r, r] for (_, s), r in zip(mine, ys)]
        fig.add_trace(go.Scatter(
            x=[x for x, _ in mine], y=ys, mode="lines+markers", line_dash="dot",
            name=f"decode speed-up ({mode})",
            error_y=dict(type="data", symmetric=False,
                         array=[_up(ci[1], y) for ci, y in zip(cis, ys)],
                         arrayminus=[_up(y, ci[0]) for ci, y in zip(cis, ys)])),
            secondary_y=True)
    fig.update_xaxes(title_text=axis)
    fig.update_yaxes(title_text="NLL change per token (nats)", secondary_y=False)
    fig.update_yaxes(title_text="decode speed-up (x)", secondary_y=True)
    fig.update_layout(margin=dict(t=30), legend=dict(orientation="h", y=-0.25))
    return fig


def lm_recommend_lines(rec: Recommended) -> list[str]:
    """A language model's recommendation in a few lines (``recommendation.summary_lines`` in
    windows and cells): the answer, the margin and test, the split, the grid, why nothing
    faster was certified, the recipe."""
    from benchmarks.views.recommendation import (faster_outside, headline, not_certified,
                                                 sequence_line)
    cert, split, failed = rec.certificate, rec.split, rec.failed
    lines = [headline(rec),
             f"margin {cert.margin_pts:g} points of next-token accuracy ({cert.margin}), "
             f"confidence {cert.confidence:.0%} (alpha {1 - cert.confidence:.2g}, one "
             f"error rate for the whole sequence), objective {cert.objective}; speed-ups "
             f"against {rec.reference}",
             f"split seed {split.seed}: {split.search_size} search / "
             f"{split.certify_size} certify of {split.test_examples} evaluation windows",
             f"grid: {len(rec.measured)} cells measured ({', '.join(rec.runtimes)})"
             + (f", {len(failed)} variant(s) failed: " + "; ".join(
                 f"{t.name}: {t.error}" for t in failed) if failed else ""),
             sequence_line(rec),
             f"test: {cert.test}"]
    beyond = faster_outside(rec)
    if beyond:
        lines.append(beyond.replace("search split", "search windows"))
    lines += [line.replace("certify split", "certify windows") for line in not_certified(rec)]
    if rec.recipe:
        lines.append(f"recipe: {rec.recipe['command']}")
    return lines


def lm_map_rows(rows: list[dict]) -> list[dict]:
    """A language model's map as a table: most sensitive first (as stored rows may come in
    measuring order), failed cells last with their one line."""
    ordered = sorted(rows, key=lambda r: (r.get("error") is not None,
                                          -(r.get("delta_nll") or 0.0)))
    out = []
    for r in ordered:
        lo, hi = r.get("delta_nll_interval") or (None, None)
        out.append({"Group": r["group"], "Layers": r.get("layers"),
                    "Level": r.get("level"), "dNLL/token": r.get("delta_nll"),
                    "95% low": lo, "95% high": hi, "Within noise": r.get("within_noise"),
                    "Accuracy change (pts)": r.get("delta_accuracy_pts"),
                    "Agreement": r.get("agreement"), "KL mean": r.get("kl_mean"),
                    "Error": r.get("error") or ""})
    return out


def lm_map_figure(rows: list[dict]):
    """Each group's NLL change with its interval, most sensitive at the top; within noise
    in grey."""
    import plotly.graph_objects as go

    from benchmarks.report.style import BASELINE_COLOR, CHART_HEIGHT, FAILED_COLOR
    done = [r for r in lm_map_rows(rows) if not r["Error"]][::-1]
    labels = [r["Group"] + ("" if r["Level"] is None else f" @ {r['Level']:g}") for r in done]
    fig = go.Figure(go.Bar(
        x=[r["dNLL/token"] for r in done], y=labels, orientation="h",
        marker_color=[BASELINE_COLOR if r["Within noise"] else FAILED_COLOR for r in done],
        error_x=dict(type="data", symmetric=False,
                     array=[r["95% high"] - r["dNLL/token"] for r in done],
                     arrayminus=[r["dNLL/token"] - r["95% low"] for r in done]),
        hovertext=[f"within noise: {r['Within noise']}" for r in done]))
    fig.add_vline(x=0.0, line_dash="dot", line_color=BASELINE_COLOR)
    fig.update_layout(title="NLL change per token, each group changed alone (95% interval)",
                      height=max(CHART_HEIGHT, 28 * len(done) + 120),
                      margin=dict(l=10, r=10, t=40, b=10))
    fig.update_xaxes(title="change in mean NLL per token (nats; above 0: worse)")
    return fig
