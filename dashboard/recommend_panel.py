"""The Experiment page's *Recommend* panel: the margin, the confidence, the objective and a
budget; *Recommend* queues a recommendation job (``benchmarks.recommend`` in the worker);
when it ends, the certified winner with its certificate (the candidates in their order, where
the sequence stopped, the speed-up's interval), the search's trials as a Pareto chart, and
*Run this*, which queues the winner's recipe as an ordinary sweep. Torch-free."""

from __future__ import annotations

import streamlit as st

from dashboard import jobs_view, state

JOB_KEY = "cb_recommend_job_id"     # the recommendation this session asked for last
MAX_TRIALS = 200


def draw(sweep_fields, choices: dict, enabled: set, device: str) -> None:
    """``sweep_fields()``: the page's SweepSpec keywords (ValueError while incomplete);
    ``choices``/``enabled``: the technique form's values and switches."""
    job_id = state.current_job_id(JOB_KEY, "recommend")
    # Drawn on demand (or while this session has a recommendation): its ten widgets cost the
    # Experiment page about 0.9 s of every load in the browser (make perf's dashboard section).
    if not st.toggle("Recommend: the fastest variant provably within a margin",
                     value=bool(job_id), key="rec_open"):
        return
    from benchmarks.report.answer import OBJECTIVES  # SciPy's import: not on the first page
    st.subheader("Recommend")
    st.caption("The fastest variant that is provably within a margin of the baseline: the "
               "search (Optuna) sees half of the test examples, the certificate is earned on "
               "the other half, once, paired with the baseline (Tango's interval, one error "
               "rate for every candidate).")
    c1, c2, c3, c4, c5 = st.columns(5)
    within = c1.text_input("Within", value="1pt", key="rec_within",
                           help="points (1pt) or a share of the baseline's accuracy (2%)")
    confidence = c2.number_input("Confidence", 0.51, 0.999, 0.95, step=0.01, key="rec_conf")
    objective = c3.selectbox("Objective", list(OBJECTIVES), key="rec_objective")
    trials = c4.number_input("Trials", 1, MAX_TRIALS, 8, key="rec_trials")
    minutes = c5.number_input("Budget (minutes, 0: none)", 0, 24 * 60, 0, key="rec_budget")
    free = st.checkbox("Search every setting's range (the form's single values do not fix "
                       "them; its swept values narrow them)", value=True, key="rec_free")
    if st.button("Recommend", key="rec_run"):
        _submit(sweep_fields, choices, enabled, device, dict(
            within=within, confidence=float(confidence), objective=objective,
            trials=int(trials), budget_s=60.0 * minutes if minutes else None), free)
    job_id = state.current_job_id(JOB_KEY, "recommend")  # the one just submitted, too
    if not job_id:
        return
    job = jobs_view.track_job(job_id)
    if job is not None and job.run_id and job.finished:
        run = state.store().run(job.run_id)
        if run and run.get("recommendation"):
            show(run, key=f"rec-{job.run_id}", device=device)


def _submit(sweep_fields, choices, enabled, device, asked: dict, free: bool) -> None:
    from benchmarks.recommend.job import payload
    from benchmarks.recommend.pipeline import check_labelled
    from benchmarks.recommend.request import RecommendRequest
    from benchmarks.spec.sweep import SweepSpec
    try:
        request = RecommendRequest(**asked)
        spec = SweepSpec(**sweep_fields())
        check_labelled(spec.dataset)
        narrowed = {k: v for k, v in choices.items()
                    if k[0] in enabled and (not free or isinstance(v, (list, tuple)))}
        job = payload(spec, request, narrowed, enabled)
    except ValueError as exc:
        st.error(str(exc))
        return
    try:
        st.session_state[JOB_KEY] = state.submit("recommend", job, device)
    except ValueError as exc:
        st.error(str(exc))
    except Exception as exc:
        st.error(f"The job could not be submitted: {state.one_line(exc)}")


def show(run: dict, key: str, device: str = "cpu") -> None:
    """A stored recommendation: its answer, certificate, trials, and *Run this*."""
    from benchmarks.report.certified import candidate_rows, headline, summary_lines, \
        trials_figure
    block = run["recommendation"]
    cert = block["certificate"]
    if cert.get("winner"):
        st.success(headline(block))
    else:
        st.warning(headline(block))
    st.markdown("  \n".join(summary_lines(block)[1:]))
    rows = candidate_rows(block)
    if rows:
        st.markdown("**The certificate**: candidates in their fixed order, slowest first; "
                    "the sequence stops at the first failure.")
        st.dataframe(rows, hide_index=True, key=f"{key}-candidates")
    st.plotly_chart(trials_figure(block), key=f"{key}-trials")
    recipe = block.get("recipe")
    if recipe:
        st.code(recipe["command"], language="bash")
        if st.button("Run this", key=f"{key}-run-this",
                     help="Queue the winner's recipe (the baseline and the winner) as an "
                          "ordinary sweep"):
            try:
                st.session_state[state.JOB_ID] = state.submit("sweep", recipe["spec"], device)
            except Exception as exc:
                st.error(f"The job could not be submitted: {state.one_line(exc)}")
            else:
                st.rerun()  # the page's sweep progress, above, shows the winner's run
