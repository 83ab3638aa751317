"""The Experiment page's *Recommend* panel: the margin, the confidence, the objective and a
budget, the data set it certifies on and, before anything is submitted, what that data can
certify (a margin it cannot is refused, with its fixes one click each); *Recommend* queues a
recommendation job (``benchmarks.recommend`` in the worker);
when it ends, the certified winner with its certificate (the candidates in their order, where
the sequence stopped, the speed-up's interval), the search's trials as a Pareto chart, and
*Run this*, which queues the winner's recipe as an ordinary sweep. Torch-free."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, estimates, jobs_view, state
from dashboard.markup import md, no_paths

JOB_KEY = "cb_recommend_job_id"     # the recommendation this session asked for last
DATA_KEY = "rec_data"               # the data set the recommendation certifies on
MAX_TRIALS = 200


def draw(sweep_fields, choices: dict, enabled: set, device: str, *,
         form_refused: bool = False) -> None:
    """``sweep_fields()``: the page's SweepSpec keywords (ValueError while incomplete);
    ``choices``/``enabled``: the technique form's values and switches; ``form_refused``: the
    page's form is refused at its top (its one sentence), so Recommend waits for its fix."""
    job_id = state.current_job_id(JOB_KEY, "recommend")
    # Drawn on demand (or while this session has a recommendation): its ten widgets cost the
    # Experiment page about 0.9 s of every load in the browser (make perf's dashboard section).
    if not st.toggle("Recommend: the fastest variant provably within a margin",
                     value=bool(job_id), key="rec_open"):
        return
    # These import SciPy (the answer's tests): not on the first page.
    from benchmarks.recommend.request import RecommendRequest
    from benchmarks.report.answer import OBJECTIVES
    default = RecommendRequest.defaults()
    st.subheader("Recommend")
    st.caption("The fastest variant whose accuracy is, with the confidence you set, at most "
               "the margin below the baseline's. A search tries variants on half of the test "
               "images; the other half, unseen until then, checks the best of them once, "
               "image by image against the baseline.")
    try:
        runtimes = tuple(sweep_fields().get("runtimes") or ("eager",))
    except ValueError:  # the page's form is incomplete: said by the page itself
        runtimes = ("eager",)
    if len(runtimes) > 1:
        st.caption(f"Searches each recipe under {', '.join(runtimes)} (the page's runtimes, "
                   f"*Where it will run*): a trial under a runtime is scored, certified and "
                   f"timed from that runtime's own outputs.")
    c1, c2, c3, c4, c5 = st.columns(5)
    # Values the one-click fixes set (st.session_state) start there, not as the widgets'
    # defaults: a widget given both warns on the page.
    st.session_state.setdefault("rec_within", default["within"])
    odds = f"{100 * (1 - float(st.session_state.get('rec_conf', default['confidence']))):.3g}"
    within = c1.text_input(
        "Within", key="rec_within",
        help=f"The accuracy you accept to lose: points (1pt: 97.0% may become 96.0%, no "
             f"lower) or a share of the baseline's accuracy (2%). Certified means: were the "
             f"variant's true accuracy loss larger than this margin, the check would pass it "
             f"at most {odds} time{'' if odds == '1' else 's'} in 100.")
    confidence = c2.number_input(
        "Confidence", 0.51, 0.999, default["confidence"], step=0.01, key="rec_conf",
        help="How sure a certificate is: at 0.95, a variant that in truth loses more than "
             "the margin is certified at most 5 times in 100, however many are checked.")
    objective = c3.selectbox("Objective", list(OBJECTIVES), key="rec_objective",
                             help="What the winner is fastest or smallest in")
    trials = c4.number_input("Trials", 1, MAX_TRIALS, 8, key="rec_trials",
                             help="Variants the search builds and measures; each costs about "
                                  "one variant of a sweep")
    minutes = c5.number_input("Budget (minutes, 0: none)", 0, 24 * 60, 0, key="rec_budget",
                              help="Ends the search when reached; what it found by then is "
                                   "checked and timed all the same")
    page_data = _page_dataset(sweep_fields)
    data = _data_choice(page_data, within, float(confidence))
    refused = _power_statement(data, within, float(confidence))
    free = st.checkbox("Search every setting's range (the form's single values do not fix "
                       "them; its swept values narrow them)", value=True, key="rec_free")
    if st.button("Recommend", key="rec_run", disabled=refused or form_refused,
                 help="A margin the data cannot certify is refused: use a fix above"
                 if refused else "The form above is refused (its sentence at the top): "
                 "mend it first" if form_refused else None):
        _submit(_on_data(sweep_fields, data, page_data), choices, enabled, device, dict(
            within=within, confidence=float(confidence), objective=objective,
            trials=int(trials), budget_s=60.0 * minutes if minutes else None), free)
    model = _page_model(sweep_fields)
    if model and data:
        st.caption("Expected duration: " + md(estimates.describe_recommend_estimate(
            model, data, int(trials), 60.0 * minutes if minutes else None,
            _planned(_on_data(sweep_fields, data, page_data)))))
    job_id = state.current_job_id(JOB_KEY, "recommend")  # the one just submitted, too
    if not job_id:
        return
    job = jobs_view.track_job(job_id)
    if job is not None and job.run_id and job.finished:
        run = state.store().run(job.run_id)
        if run and run.get("recommendation"):
            show(run, key=f"rec-{job.run_id}", device=device)


def _planned(sweep_fields) -> dict | None:
    """The page's sweep on the recommendation's data, as a dict (its variants the kind of
    trial the search starts from): what a first estimate counts the work of."""
    from benchmarks.spec.sweep import SweepSpec
    try:
        return SweepSpec(**sweep_fields()).to_dict()
    except (ValueError, TypeError):
        return None


def _page_dataset(sweep_fields) -> str | None:
    """The page's data set, when its form is complete and the data has labels."""
    from benchmarks.spec.datasets import dataset_entry
    try:
        name = sweep_fields()["dataset"]
        return name if dataset_entry(name).has_labels else None
    except (ValueError, KeyError):
        return None


def _page_model(sweep_fields) -> str | None:
    try:
        return sweep_fields()["model"]
    except (ValueError, KeyError):
        return None


def _power(data: str | None, within, confidence: float):
    """What ``data`` can certify at ``within`` (power.py), None for a margin that does not
    parse (the Recommend click says why)."""
    from benchmarks.recommend.power import data_power
    from benchmarks.recommend.request import DEFAULT_CERTIFY_FRACTION
    if data is None:
        return None
    try:
        return data_power(data, within, confidence, DEFAULT_CERTIFY_FRACTION)
    except ValueError:
        return None


def _larger(within, confidence: float) -> str | None:
    from benchmarks.recommend.power import embedded_that_certifies
    from benchmarks.recommend.request import DEFAULT_CERTIFY_FRACTION
    try:
        return embedded_that_certifies(within, confidence, DEFAULT_CERTIFY_FRACTION)
    except ValueError:
        return None


def _data_choice(page_data: str | None, within, confidence: float) -> str | None:
    """The data the recommendation certifies on: the page's, or an embedded set. It opens on
    the page's data where a typical candidate can be certified there at the margin, else on
    the smallest embedded set where one can (digits' 180 certify images cannot hold 1 point;
    mnist5k's 1,250 can), so the panel's defaults certify."""
    from benchmarks.spec.datasets import dataset_entries
    options = [page_data] if page_data else []
    options += [e.name for e in dataset_entries()
                if e.embedded and e.has_labels and e.name not in options]
    if not options:
        return None
    power = _power(page_data, within, confidence)
    default = page_data if power is not None and not power.typical_fails else (
        _larger(within, confidence) or page_data or options[0])
    if st.session_state.get(DATA_KEY) not in options:
        st.session_state[DATA_KEY] = default

    def label(name: str) -> str:
        if name != page_data:
            return name
        # A folder's name is a path on the server: not shown.
        return "the page's image folder" if ":" in name else f"{name} (the page's data)"

    return st.selectbox("Certify on", options, key=DATA_KEY, format_func=label,
                        help="The data set the search and the certificate use: half of its "
                             "test images search, the other half certify")


def _set(key: str, value) -> None:
    st.session_state[key] = value


def _power_statement(data: str | None, within, confidence: float) -> bool:
    """Before anything is submitted: what the chosen data can certify, and where it cannot
    certify the margin, the margin it can and the embedded data set that can, each one
    click. True when the margin is refused (no candidate could be certified)."""
    power = _power(data, within, confidence)
    if power is None:
        return False
    if not power.typical_fails:
        st.info(power.sentence())
        return False
    (st.error if power.refused else st.warning)(power.sentence())
    larger = _larger(within, confidence)
    c1, c2 = st.columns(2)
    if power.typical is not None:
        c1.button(f"Certify within {power.typical:g}pt", key="rec_fix_margin",
                  on_click=_set, args=("rec_within", f"{power.typical:g}pt"),
                  help="The margin a candidate that differs from the baseline on 1 in 30 "
                       f"examples can pass on {data}")
    if larger and larger != data:
        c2.button(f"Certify on {larger}", key="rec_fix_data", on_click=_set,
                  args=(DATA_KEY, larger),
                  help=f"{larger} has enough test images to certify {power.margin.text()}")
    return power.refused


def _on_data(sweep_fields, data: str | None, page_data: str | None):
    """The page's sweep keywords, on the panel's data set: an embedded set other than the
    page's takes none of the page's folder settings (its shape, its labels)."""
    if data is None or data == page_data:
        return sweep_fields

    def fields() -> dict:
        out = dict(sweep_fields())
        out.update(dataset=data, input_shape=None, labels=None)
        return out
    return fields


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
        # The page's runtimes ("Where it will run") are where a trial may run: each recipe
        # under each is a point of the search.
        job = payload(spec, request, narrowed, enabled, runtimes=spec.runtimes)
    except ValueError as exc:
        st.error(str(exc))
        return
    try:
        st.session_state[JOB_KEY] = state.submit("recommend", job, device)
    except ValueError as exc:
        st.error(str(exc))
    except Exception as exc:
        st.error(f"The job could not be submitted: {state.one_line(exc)}")


def _next_steps(run: dict, rec, key: str, device: str) -> None:
    """Nothing certified: what to try next, each one click (a new recommendation of the same
    model, data and space, its request changed; ``views.recommendation.next_steps``)."""
    from benchmarks.views.recommendation import next_steps
    steps = next_steps(rec)
    if not steps:
        return
    if not state.may_run_on(run, "recommend"):  # a shared link: read-only, as the queue is
        st.caption("Next: " + "; ".join(md(f"{s.label} ({s.why})") for s in steps) + ".")
        return
    st.markdown("**What to try next**")
    for column, step in zip(st.columns(len(steps)), steps):
        if column.button(step.label, key=f"{key}-next-{step.key}", help=step.why):
            _ask_again(run, step.changes, device)


def _ask_again(run: dict, changes: dict, device: str) -> None:
    from benchmarks.recommend.job import asked_again
    try:
        job = asked_again(run, changes)
        st.session_state[JOB_KEY] = state.submit("recommend", job, device)
    except ValueError as exc:
        st.error(md(str(exc)))
    except Exception as exc:
        st.error(f"The job could not be submitted: {md(state.one_line(exc))}")
    else:
        st.rerun()


def show(run: dict, key: str, device: str = "cpu") -> None:
    """A stored recommendation: its answer, certificate, trials, and *Run this*."""
    from benchmarks.recommend.record import Recommended
    from benchmarks.views.recommendation import COLUMN_HELP, candidate_rows, \
        certificate_caption, headline, summary_lines, trials_figure
    rec = Recommended.from_dict(run["recommendation"])
    own = state.owns(run)  # others see the recipe without the server's paths

    def shown(line: str) -> str:  # a name, a path, a reason: text, never Markdown
        return md(line if own else no_paths(line))
    if rec.certificate.winner:
        st.success(shown(headline(rec)))
    else:
        st.warning(shown(headline(rec)))
        _next_steps(run, rec, key, device)
    st.markdown("  \n".join(shown(line) for line in summary_lines(
        rec, run.get("environment"))[1:]))
    rows = candidate_rows(rec)
    if rows:
        st.markdown(certificate_caption(rec))
        st.dataframe(rows, hide_index=True, key=f"{key}-candidates", column_config={
            name: st.column_config.Column(help=text) for name, text in COLUMN_HELP.items()})
    charts.show(trials_figure(rec), key=f"{key}-trials")
    recipe = rec.recipe
    if recipe:
        if not state.may_run_on(run, "sweep"):  # a shared link: read-only, as the queue is
            st.code(no_paths(recipe["command"]), language="bash")
            st.caption("Only the person who ran it can queue this recipe here: a shared link "
                       "shows the command to run it yourself.")
            return
        st.code(recipe["command"], language="bash")
        if st.button("Run this", key=f"{key}-run-this",
                     help="Queue the winner's recipe (the baseline and the winner) as an "
                          "ordinary sweep"):
            try:  # the run it comes from, named for the queue's owner check
                st.session_state[state.JOB_ID] = state.submit(
                    "sweep", {**recipe["spec"], "source_run": run["run_id"]}, device)
            except Exception as exc:
                st.error(f"The job could not be submitted: {md(state.one_line(exc))}")
            else:
                st.rerun()  # the page's sweep progress, above, shows the winner's run
