"""A language model's run on the Results page (a stored run of kind ``lm``, from `run
--model tiny-lm|smollm2-135m|hf:DIR --dataset text`): the answer in LM terms first (the
fastest cell whose NLL change is within noise, its speed-up and change with intervals), then
every cell's perplexity change, agreement, KL, prefill and decode time, tokens per second,
memory and stored size side by side, and the speed/quality chart; a `recommend` run's
certificate before them. The figures are
``benchmarks.views.lm``'s, from the stored records; the page never imports torch."""

from __future__ import annotations

import streamlit as st

from benchmarks.views.lm import (lm_answer, lm_curve_figure, lm_curves, lm_notes, lm_rows,
                                  lm_tradeoff_figure)
from dashboard import charts, state
from dashboard.markup import md, shown_error

COLUMNS = {
    "Perplexity": st.column_config.NumberColumn(format="%.2f"),
    "dNLL/token": st.column_config.NumberColumn(
        format="%+.4f", help="the variant's mean NLL per token minus the baseline's, on the "
                             "same evaluation windows (nats)"),
    "dNLL 95% low": st.column_config.NumberColumn(format="%+.4f"),
    "dNLL 95% high": st.column_config.NumberColumn(
        format="%+.4f", help="a percentile bootstrap over windows, 95%"),
    "Within noise": st.column_config.CheckboxColumn(
        help="the NLL change's interval holds 0: not shown different (which is not shown "
             "equal)"),
    "Agreement": st.column_config.NumberColumn(
        format="percent", help="how often the variant's next-token top-1 is the baseline's"),
    "KL mean": st.column_config.NumberColumn(format="%.4f",
                                             help="KL(baseline || variant) per token"),
    "Decode speed-up": st.column_config.NumberColumn(
        format="%.2fx", help="the baseline's decode time per token over this cell's, both in "
                             "the same mode, timed in the same interleaved rounds"),
    "Speed-up 95% low": st.column_config.NumberColumn(format="%.2f"),
    "Speed-up 95% high": st.column_config.NumberColumn(format="%.2f"),
    "Prefill ms": st.column_config.NumberColumn(format="%.1f"),
    "Decode ms/token": st.column_config.NumberColumn(format="%.2f"),
    "Tokens/s": st.column_config.NumberColumn(format="%.1f"),
    "Peak MB": st.column_config.NumberColumn(format="%.1f",
                                             help="weights, prompt and one generation's peak"),
    "Weights MB": st.column_config.NumberColumn(
        format="%.2f", help="as stored: quantized weights' integer data and scales, a tied "
                            "embedding once, a pruned layer's zeros still dense"),
}


def draw(run: dict, key: str) -> None:
    variants = run.get("variants") or []
    if run.get("error"):
        st.warning(f"Run {md(run['status'])}: {shown_error(run['error'], state.owns(run))}")
    if not variants:
        st.info("This language model's run has no stored variant yet.")
        return
    if run.get("status") == "running":  # the answer waits for every cell's timing
        planned = len((run.get("spec") or {}).get("variants") or []) or "?"
        st.info(f"Measuring: {len(variants)} of {planned} variants built and scored; every "
                f"cell is timed together once all are, and the answer comes then.")
        st.dataframe(lm_rows(variants), column_config=COLUMNS, hide_index=True,
                     key=f"{key}-lm-table")
        return
    if run.get("recommendation"):  # `recommend` on it: the certificate answers first
        certificate(run["recommendation"], key)
    answer = lm_answer(variants)
    text = run.get("environment", {}).get("text", {})
    st.markdown(f"**The answer** (a language model, {md(run.get('model', ''))} on "
                f"{md(run.get('dataset', ''))}: {text.get('windows', '?')} windows of "
                f"{text.get('window', '?')} tokens): {md(answer.line)}")
    if answer.variant is not None:
        columns = st.columns(3)
        columns[0].metric("Variant", md(answer.variant), help=f"mode: {answer.mode}")
        low, high = answer.speedup_interval
        columns[1].metric("Decode speed-up", f"{answer.decode_speedup:.2f}x",
                          help=f"95% interval [{low:.2f}, {high:.2f}] over timing rounds")
        d_low, d_high = answer.delta_nll_interval
        columns[2].metric("NLL change per token", f"{answer.delta_nll:+.4f}",
                          help=f"95% interval [{d_low:+.4f}, {d_high:+.4f}] over windows")
    st.dataframe(lm_rows(variants), column_config=COLUMNS, hide_index=True,
                 key=f"{key}-lm-table")
    for note in lm_notes(variants):
        st.caption(md(note))
    charts.show(lm_tradeoff_figure(variants), key=f"{key}-lm-chart")
    for axis, points in lm_curves(variants).items():  # a swept setting: its curve
        st.markdown(f"**{md(axis)}**: the NLL change and the decode speed-up along it")
        charts.show(lm_curve_figure(axis, points), key=f"{key}-lm-curve-{axis}")


def certificate(block: dict, key: str) -> None:
    """A language model's recommendation: the certified cell (or why none), the lines that
    say on what and how, the candidates in their order, the grid's cells as a chart."""
    from benchmarks.recommend.record import Recommended
    from benchmarks.views.lm import lm_recommend_lines
    from benchmarks.views.recommendation import candidate_rows, trials_figure
    rec = Recommended.from_dict(block)
    head, *lines = lm_recommend_lines(rec)
    (st.success if rec.certificate.winner else st.warning)(md(head))
    for line in lines:
        st.caption(md(line))
    st.dataframe(candidate_rows(rec), hide_index=True, key=f"{key}-lm-certificate")
    charts.show(trials_figure(rec), key=f"{key}-lm-trials")


MAP_COLUMNS = {
    "dNLL/token": st.column_config.NumberColumn(
        format="%+.4f", help="the model with only this group changed, minus the baseline: "
                             "mean NLL per token on the same screening windows (nats)"),
    "95% low": st.column_config.NumberColumn(format="%+.4f"),
    "95% high": st.column_config.NumberColumn(
        format="%+.4f", help="a percentile bootstrap over windows, 95%"),
    "Within noise": st.column_config.CheckboxColumn(
        help="the interval holds 0: not shown different (which is not shown harmless)"),
    "Accuracy change (pts)": st.column_config.NumberColumn(format="%+.2f"),
    "Agreement": st.column_config.NumberColumn(format="percent"),
    "KL mean": st.column_config.NumberColumn(format="%.4f"),
}


def draw_map(run: dict, key: str) -> None:
    """A language model's sensitivity map (``sensitivity --model ... --dataset text``): each
    group changed alone, most sensitive first, with its interval and the chart of them."""
    from benchmarks.views.lm import lm_map_figure, lm_map_rows
    summary = (run.get("environment") or {}).get("sensitivity") or {}
    config = (run.get("spec") or {}).get("sensitivity") or {}
    rows = run.get("variants") or []
    st.subheader("Sensitivity: which layers tolerate it")
    st.caption(md(f"{config.get('technique')} on {run.get('model')}, by "
                  f"{config.get('by')}: each group changed alone, the rest as loaded; "
                  f"{summary.get('windows', '?')} screening windows, "
                  f"{summary.get('tokens', '?')} tokens; most sensitive first"))
    if run.get("error"):
        st.warning(f"Map {md(run['status'])}: {shown_error(run['error'], state.owns(run))}")
    if not rows:
        st.info("No cell of this map has been measured yet.")
        return
    st.dataframe(lm_map_rows(rows), column_config=MAP_COLUMNS, hide_index=True,
                 key=f"{key}-lm-map")
    charts.show(lm_map_figure(rows), key=f"{key}-lm-map-chart")
