"""The Sensitivity view of a run on the Results page: where to compress.

For a sweep: draw a sensitivity map of its baseline (a job in the queue, owned, capped and
cancellable like every other), then the heatmap of groups x levels coloured by each cell's
interval lower bound (hatched where it crosses zero: within noise), the scatter of accuracy
change against latency share, and *Apply as schedule*, which queues the schedule's
verification sweep (the baseline, the schedule's variant and, for pruning, uniform pruning
at the map's levels beside it). A sweep that applied a schedule shows its map's prediction
beside the measured change; every variant its per-layer diagnostics. A map opened by its
own link (a run of kind "sensitivity") draws the map alone.

The page never imports torch: the figures are ``benchmarks.views.sensitivity``'s, the
config and the schedule's knapsack are torch-free.
"""

from __future__ import annotations

import json

import streamlit as st

from benchmarks.sensitivity.record import StoredMap
from benchmarks.views import sensitivity as figures
from benchmarks.sensitivity.config import IMAGE_TECHNIQUES, SensitivityConfig
from dashboard import charts, jobs_view, results_view, settings_form, state
from dashboard.markup import md, no_paths

MAP_JOB_ID = "cb_sensitivity_job_id"        # the map this session asked for last
SCHEDULE_JOB_ID = "cb_schedule_job_id"      # the verification sweep it queued last
MAPS_LISTED = 20


def draw(run: dict, key: str) -> None:
    """The view of ``run`` (a stored run as the store returns it)."""
    if run.get("kind") == "sensitivity":
        if (run.get("spec") or {}).get("family") == "lm":  # a language model's layers
            from dashboard import lm_view
            lm_view.draw_map(run, key)
        else:
            draw_map(run, key)
        return
    if run.get("kind", "sweep") != "sweep":
        return
    st.subheader("Sensitivity: where to compress")
    _schedule_checks(run)
    maps = _maps_of(run)
    if state.may_run_on(run, "sensitivity"):
        _map_form(run, key, expanded=not maps)
    else:  # a shared link is read-only: the queue would refuse the map as well
        st.caption("Only the person who ran it can draw a sensitivity map of this run: a "
                   "shared link shows the maps it has.")
    if maps:
        ids = [m["run_id"] for m in maps]
        chosen = st.selectbox("Sensitivity maps of this run's baseline", ids,
                              format_func=lambda i: _map_label(next(
                                  m for m in maps if m["run_id"] == i)),
                              key=f"{key}-sens-map")
        stored = state.store().run(chosen)
        if stored is not None:
            draw_map(stored, f"{key}-{chosen}", source=run)
    _diagnostics(run, key)


def _maps_of(run: dict) -> list[dict]:
    """The maps made of this sweep's baseline, newest first."""
    try:
        found = state.store().runs(limit=MAPS_LISTED, kind="sensitivity", model=run["model"],
                                   dataset=run["dataset"], with_variants=False)
    except Exception as exc:
        st.error(f"Cannot read the results store: {md(state.one_line(exc))}")
        return []
    return [m for m in found if (m.get("spec") or {}).get("source_run") == run["run_id"]]


def _map_label(run: dict) -> str:
    config = (run.get("spec") or {}).get("sensitivity") or {}
    levels = ",".join(f"{v:g}" for v in config.get("levels") or [])
    return (f"{(run.get('created_at') or '')[:19].replace('T', ' ')} · "
            f"{config.get('technique')} at {levels} · {run.get('status')}")


def _map_form(run: dict, key: str, expanded: bool) -> None:
    """The map's settings (``SensitivityConfig``'s fields) and its job."""
    with st.expander("Draw a sensitivity map of this baseline", expanded=expanded):
        with st.form(f"{key}-sens-form"):
            values = settings_form.config_form(SensitivityConfig, f"{key}-sens", options={
                "max_drop": ["0.5pt", "1pt", "2pt", "5pt"],
                "technique": list(IMAGE_TECHNIQUES)})  # a language model's map is the CLI's
            submitted = st.form_submit_button("Draw sensitivity map")
        if submitted:
            _submit_map(run, values)
        job_id = st.session_state.get(MAP_JOB_ID)
        job = state.queue().get(job_id) if job_id else None
        if job is not None and job.payload.get("source_run") == run["run_id"]:
            jobs_view.track_job(job_id)


def _submit_map(run: dict, values: dict) -> None:
    try:  # the config the worker builds, checked here first: a mistake is one line
        config = SensitivityConfig(**values)
    except ValueError as exc:
        st.error(md(exc))
        return
    spec = run.get("spec") or {}
    payload = {"model": run["model"], "dataset": run["dataset"], "sweep": spec,
               "sensitivity": config.to_dict(), "source_run": run["run_id"]}
    try:
        st.session_state[MAP_JOB_ID] = state.submit("sensitivity", payload,
                                                    spec.get("device", "auto"))
    except Exception as exc:
        st.error(f"The map could not be queued: {md(state.one_line(exc))}")


def draw_map(stored: dict, key: str, source: dict | None = None) -> None:
    """One stored map: its figures, its rows, its schedule and *Apply as schedule*."""
    found = StoredMap.from_run(stored)
    rows = list(found.rows)
    # A map still being measured polls the store and draws the page again as cells land
    # and once when it ends: "running" never outlives the run.
    results_view.follow(stored, key=f"{key}-map")
    if not rows:
        st.info("This map has no cell yet: they appear as they are measured.")
        return
    baseline, subset = found.baseline, found.subset
    if subset:
        confirmed = ", ".join(found.confirmed) or "none"
        st.caption(f"{md(found.technique)} on {md(no_paths(stored.get('model')))}: every cell "
                   f"screened on {subset.get('size')} of {subset.get('of')} test examples "
                   f"(stratified, seed {subset.get('seed')}); confirmed on all: "
                   f"{md(confirmed)}. Baseline accuracy "
                   f"{100 * (baseline.get('accuracy') or 0):.2f}%.")
    left, right = st.columns(2)
    with left:
        charts.show(figures.heatmap(list(found.cells)), key=f"{key}-heatmap")
    with right:
        charts.show(figures.scatter(list(found.cells)), key=f"{key}-scatter")
    own = state.owns(stored)  # a cell's error names no server path to anyone else
    with st.expander("The map's cells", expanded=False):
        st.dataframe(cell_rows(rows, own), hide_index=True, key=f"{key}-cells")
    if stored.get("status") == "running":
        st.info("The map is still being measured: its cells appear here as they land.")
        return
    _apply(stored, found, key, source)


def _apply(stored: dict, found: StoredMap, key: str, source: dict | None) -> None:
    """The map's schedule (its own, or one chosen here within another budget) and the button
    that queues its verification sweep."""
    from benchmarks.sensitivity.schedule import build_schedule, schedule_variant
    schedule = found.schedule
    default = (schedule or {}).get("max_drop_pts") or 1.0
    budget = st.number_input("Accuracy budget of the schedule (points)", 0.05, 100.0,
                             float(default), 0.25, key=f"{key}-budget")
    baseline, config = found.baseline, found.config
    objective = config.get("objective", "p50")
    if schedule is None or schedule.get("max_drop_pts") != budget:
        latency = (baseline.get("latency_ms") or {}).get(objective)
        if latency is None:
            st.info("The map has no baseline latency to choose a schedule with.")
            return
        try:
            schedule = build_schedule(list(found.rows), model=stored["model"],
                                      technique=found.technique, budget_pts=budget,
                                      baseline_ms=latency, objective=objective,
                                      dataset=stored["dataset"], map_run=stored["run_id"],
                                      finetune_epochs=config.get("finetune_epochs", 0))
        except ValueError as exc:
            st.error(md(exc))
            return
    predicted = schedule["predicted"]
    st.markdown(f"**Schedule within {budget:g} points**: predicted "
                f"{predicted['accuracy_change_pts']:+.2f} points and "
                f"{predicted['saved_ms']:.3f} ms of {predicted['baseline_ms']:.3f} ms "
                f"({objective}) saved. Effects are not additive: the verification sweep "
                f"measures it against the baseline on the same examples"
                + (f", with the same {schedule['finetune_epochs']} epochs of fine-tuning as "
                   f"the map's cells." if schedule.get("finetune_epochs") is not None
                   else "."))
    measured = schedule.get("measured") or {}
    if measured.get("saving") is not None:
        ci = measured.get("saving_ci")
        st.caption(f"Latency saved ({measured['objective']}): predicted "
                   f"{predicted['saving']:.1%}, measured {measured['saving']:.1%}"
                   + ("" if ci is None else f" [95% interval {ci[0]:.1%}, {ci[1]:.1%}]")
                   + f" ({measured['schedule_ms']:.3f} vs {measured['baseline_ms']:.3f} ms, "
                     f"{measured['rounds']} interleaved rounds).")
    checked = schedule.get("checked") or {}
    if checked.get("accuracy_change") is not None:
        low, high = checked["accuracy_change_ci"]
        st.caption(f"The whole schedule on the map's {checked['on']} examples: "
                   f"{checked['accuracy_change']:+.2f} points [{low:+.2f}, {high:+.2f}]"
                   + (f"; let go to fit: {md(', '.join(map(str, checked['let_go'])))}"
                      if checked.get("let_go") else ""))
    c1, c2 = st.columns(2)
    c1.download_button("Download schedule", json.dumps(schedule, indent=2),
                       file_name=f"schedule-{stored['run_id']}.json",
                       mime="application/json", key=f"{key}-schedule-json", on_click="ignore")
    if not _may_apply(stored, source):
        c2.caption("Only the person who made this map can apply its schedule: a shared "
                   "link shows it and its download.")
    elif c2.button("Apply as schedule", key=f"{key}-apply", type="primary"):
        spec = _verification(stored, schedule, found, source)
        if spec is not None:
            try:
                st.session_state[SCHEDULE_JOB_ID] = state.submit(
                    "sweep", spec, spec.get("device", "auto"))
            except Exception as exc:
                st.error(f"The verification could not be queued: {md(state.one_line(exc))}")
    job_id = st.session_state.get(SCHEDULE_JOB_ID)
    job = state.queue().get(job_id) if job_id else None
    if job is not None and any(v["name"] == schedule_variant(schedule).name
                               for v in job.payload.get("variants") or []):
        st.caption("The schedule's verification sweep:")
        job = jobs_view.track_job(job_id)
        if job is not None and job.run_id:
            st.markdown(f"Its results: [open the run]({state.run_link(job.run_id)})")


def _verification(stored: dict, schedule: dict, found: StoredMap,
                  source: dict | None) -> dict | None:
    """The verification sweep: the map's baseline, the schedule's variant and, for pruning,
    the uniform ratios of the map's levels, timed side by side."""
    from benchmarks.sensitivity.schedule import verification_variants
    from benchmarks.spec.sweep import SweepSpec
    from benchmarks.spec.variant import BASELINE
    spec = dict(((stored.get("spec") or {}).get("sweep")) or (source or {}).get("spec") or {})
    if not spec:
        st.error("This map does not say which sweep's baseline it maps.")
        return None
    variants = [BASELINE, *verification_variants(schedule, list(found.levels))]
    try:
        verification = SweepSpec.from_dict({**spec, "variants": [v.to_dict() for v in
                                                                  variants]}).to_dict()
    except ValueError as exc:
        st.error(md(exc))
        return None
    # The run it is verified on, named for the queue's owner check (the schedule names its map).
    mapped = (source or {}).get("run_id") or (stored.get("spec") or {}).get("source_run")
    return {**verification, "source_run": mapped} if mapped else verification


def _may_apply(stored: dict, source: dict | None) -> bool:
    """Apply as schedule queues a sweep on the map's run and on the sweep it maps: both must
    be the viewer's (or the viewer an admin), as the queue checks."""
    return state.may_run_on(stored, "sweep") and (source is None or
                                                  state.may_run_on(source, "sweep"))


def schedule_rows(checks: list[dict]) -> list[dict]:
    """The schedule checks as a table reads them (benchmarks.report.formats): headers in
    words, changes in points, savings as percents, "—" with why."""
    from benchmarks.report import formats as f  # the one formatting layer
    def interval(ci, fmt, reason):
        return f.missing(reason) if ci is None else f"[{fmt(ci[0])}, {fmt(ci[1])}]"
    return [{
        "Variant": c["variant"], "Technique": c["technique"],
        "Predicted Δ (points)": f.points(c["predicted_pts"], "not predicted"),
        "Measured Δ (points)": f.points(c["measured_pts"]),
        "Measured 95% interval": interval(c["measured_ci"], f.points, "no paired test"),
        "p (paired)": f.cell("p_value", c["p_value"], "no paired test"),
        "Budget (points)": f.plain(c["max_drop_pts"]),
        "Within budget": f.plain(c["within_budget"]),
        "Predicted saving": f.percent(c["predicted_saving"], "not predicted"),
        "Measured saving": f.percent(c["measured_saving"]),
        "Measured saving 95% interval": interval(c["measured_saving_ci"], f.percent,
                                                 "not timed in rounds"),
        "Fine-tuning (predicted / applied)": f"{f.plain(c['predicted_finetune_epochs'], '')}"
                                             f" / {f.plain(c['finetune_epochs'], '')}"}
        for c in checks]


def cell_rows(rows: list[dict], own: bool) -> list[dict]:
    """The map's cells as a table reads them; a cell's error names no server path to anyone
    but the map's owner."""
    from benchmarks.report.formats import display_rows
    return display_rows([{**r, "error": no_paths(r["error"])} if r.get("error") and not own
                         else r for r in rows], [
        "root", "level", "accuracy_change", "accuracy_change_ci", "p_value",
        "latency_share", "macs_removed", "sqnr_db", "group_sqnr_db", "evaluated_on",
        "error"], reasons={"sqnr_db": "not a quantization cell",
                           "group_sqnr_db": "not a quantization cell",
                           "accuracy_change_ci": "no paired test"})


def _schedule_checks(run: dict) -> None:
    """A sweep that applied a schedule: the map's prediction beside the measured change."""
    from benchmarks.report.document import RunReport
    report = RunReport.from_stored(run)
    checks = figures.schedule_checks(report.variants, report.baseline)
    if not checks:
        return
    st.markdown("**Schedules: predicted against measured** (paired on the same test examples; "
                "the map's cells were measured one group at a time, and effects are not "
                "additive)")
    st.dataframe(schedule_rows(checks), hide_index=True, key=f"schedule-checks-{run['run_id']}")


def _diagnostics(run: dict, key: str) -> None:
    """Per-layer SQNR and cosine of a chosen variant against the baseline, and the test
    examples whose correctness flipped."""
    from benchmarks.report.document import RunReport
    document = RunReport.from_stored(run).document()
    with_layers = [v for v in document["variants"] if v.get("diagnostics")]
    if not with_layers:
        return
    with st.expander("Per-layer diagnostics against the baseline", expanded=False):
        names = [v["name"] for v in with_layers]
        name = st.selectbox("Variant", names, key=f"{key}-diag-variant")
        variant = next(v for v in with_layers if v["name"] == name)
        diag = variant["diagnostics"]
        if diag.get("error"):
            st.warning(f"No diagnostics: {md(diag['error'])}")
            return
        out = diag.get("output") or {}
        st.caption(f"On a fixed batch of {diag.get('batch')} test images: the output's SQNR "
                   f"{_db(out.get('sqnr_db'))}, cosine {_num(out.get('cosine'), '{:.4f}')}."
                   + (f" {md(diag['note'])}." if diag.get("note") else "")
                   + (f" {diag['skipped']} layers changed shape (pruned) and are not "
                      f"compared." if diag.get("skipped") else ""))
        if diag.get("layers"):
            charts.show(figures.layers_chart(diag, f"{name}: per-layer SQNR"),
                        key=f"{key}-diag-chart")
        flips = variant.get("flips_vs_baseline")
        if flips:
            counts = flips["counts"]
            st.markdown(f"**Flipped examples** (test-split indices): "
                        f"{counts['became_wrong']} became wrong, {counts['became_right']} "
                        f"became right.")
            st.caption("Became wrong: " + (", ".join(map(str, flips["became_wrong"]))
                                           or "none"))
            st.caption("Became right: " + (", ".join(map(str, flips["became_right"]))
                                           or "none"))


def _db(value) -> str:
    return "-" if value is None else f"{value:.1f} dB"


def _num(value, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)
