"""A job as it runs, and My jobs: where a job stands, a running sweep as steps (``st.status``:
the current variant and phase, the variants done with their headline figures as they land,
the estimate counting down), Cancel, and every job of this session's owner."""

from __future__ import annotations

import time

import streamlit as st

from dashboard import readback, state
from dashboard.markup import md, no_paths
from dashboard.model_files import said  # a job's error, as its owner's pages say it
from dashboard.state import POLL_S, SEEN_VARIANTS, one_line, queue, store

ACTIVE = ("queued", "running")
REDRAW_S = 4.0
MY_JOBS_POLL_S = 2.0
MY_JOBS_ACTIVE = "cb_my_jobs_active"
STEPS = "cb_job_steps"   # session state: per job, the variants done and the estimate then


def job_fraction(progress: dict | None) -> float:
    p = progress or {}
    total, index = p.get("total") or 0, p.get("index")
    frac = p.get("fraction") or 0.0
    if not total or index is None or index < 0:
        return 0.0
    return min(1.0, max(0.0, (index + frac) / total))


MIN_PACE_FRACTION = 0.05  # below this share done, the pace so far says too little to extrapolate


def elapsed_s(job) -> float | None:
    """Seconds since the job started (its worker's clock, in UTC); None before it starts."""
    from datetime import datetime, timezone
    try:
        started = datetime.fromisoformat(job.started_at)
    except (TypeError, ValueError):
        return None
    if started.tzinfo is None:
        started = started.replace(tzinfo=timezone.utc)
    return max(0.0, (datetime.now(timezone.utc) - started).total_seconds())


def countdown_text(left: float | None, elapsed: float | None, fraction: float,
                   basis: str = "earlier runs here") -> str | None:
    """The time left as the bar says it: the estimate counting down while it has time left;
    once it has run out (or where there was none: the first run here), the pace so far
    extrapolated, never "0 s" before the end."""
    from benchmarks.run.estimate import format_seconds
    if left is not None and left >= 1.0:
        return f"about {format_seconds(left)} left (estimated from {basis})"
    pace = None
    if elapsed is not None and MIN_PACE_FRACTION <= fraction < 1.0:
        pace = max(1.0, elapsed * (1.0 - fraction) / fraction)
    head = "longer than estimated: " if left is not None else ""
    if pace is not None:
        return f"{head}about {format_seconds(pace)} left at the pace so far"
    if left is not None:
        return "longer than estimated: not far enough along to say how much longer"
    return None


def steps_total(job) -> int:
    """How many rows the step list will hold: the sweep's variants as submitted, else what
    the worker's progress says (0: not known yet)."""
    variants = (job.payload or {}).get("variants") if job.kind == "sweep" else None
    return len(variants) if variants else int((job.progress or {}).get("total") or 0)


def status_label(job, done: int, total: int) -> str:
    """The running job's header, counted from the same stored variants as the step list
    below it (the worker's own index restarts with each phase: a counter read from it
    jumped back at the timing rounds)."""
    head = f"Running: {done} of {total} done" if total else "Running"
    return head + (" (cancelling…)" if job.cancel_requested else "")


def progress_text(job) -> str:
    p = job.progress or {}
    return p.get("message") or (f"{p.get('variant', '')}: {p.get('phase', '')}".strip(": ")
                                or "starting")


def headline(variant: dict) -> str:
    """A finished variant's figures in a few words: accuracy, p50, size."""
    parts = []
    if variant.get("error"):
        return f"failed: {one_line(variant['error'])}"
    if variant.get("accuracy") is not None:
        parts.append(f"accuracy {100 * variant['accuracy']:.2f}%")
    latency = variant.get("latency_ms") or {}
    if latency.get("p50") is not None:
        parts.append(f"p50 {latency['p50']:.3f} ms")
    elif not variant.get("workers"):  # a distributed run times training, not latency
        parts.append("latency: timed with the others at the end")
    if variant.get("size_mb") is not None:
        parts.append(f"{variant['size_mb']:.2f} MB")
    if variant.get("throughput") is not None and variant.get("workers"):
        parts.append(f"{variant['throughput']:,.0f} samples/s")
    return " · ".join(parts)


def _steps(job) -> tuple[list[dict], float | None, str]:
    """The job's variants stored so far, the seconds the rest should take as estimated when
    the last one landed (read again only when one lands), and what the estimate is from."""
    count = store().variant_count(job.run_id) if job.run_id else 0
    memo = st.session_state.setdefault(STEPS, {}).get(job.job_id)
    if memo is None or memo["count"] != count:
        run = store().run(job.run_id) if job.run_id and count else None
        done = list((run or {}).get("variants") or [])
        left, basis = _estimate_left(job, done)
        memo = {"count": count, "done": done, "left": left, "basis": basis,
                "at": time.monotonic()}
        st.session_state[STEPS][job.job_id] = memo
    left = memo["left"]
    if left is not None:  # below zero: it is taking longer than estimated (countdown_text)
        left = left - (time.monotonic() - memo["at"])
    return memo["done"], left, memo.get("basis", "earlier runs here")


def _estimate_left(job, done: list[dict]) -> tuple[float | None, str]:
    """The estimate (``benchmarks.run.estimate``) of the variants not done yet, and what it
    is from: earlier runs of the model and data set, else the machine's speed."""
    basis = "earlier runs here"
    if job.kind != "sweep":
        return None, basis
    from benchmarks.run.estimate import HISTORY_RUNS, SPEED, estimate_sweep
    names = {v.get("name") for v in done}
    spec = dict(job.payload or {})
    spec["variants"] = [v for v in spec.get("variants") or [] if v.get("name") not in names]
    try:
        runs = store().runs(limit=20, kind="sweep", model=spec.get("model"),
                            dataset=spec.get("dataset"))
        runs = [r for r in runs if r.get("run_id") != job.run_id]
        left = estimate_sweep(spec, runs)
        speed = (state.worker_card("cpu") or {}).get("speed")
        if left.seconds is None and speed:
            earlier = [r for r in store().runs(limit=HISTORY_RUNS, kind="sweep")
                       if r.get("run_id") != job.run_id]
            left = estimate_sweep(spec, runs, speed=speed, earlier=earlier)
        if left.seconds is None:
            return None, basis
        if left.source == SPEED:
            basis = "this machine's speed"
        # The run's time outside its rows is spread over it: the share already behind goes.
        total = len((job.payload or {}).get("variants") or []) or 1
        return left.seconds - left.overhead_s * min(1.0, len(names) / total), basis
    except Exception:  # no estimate is no reason to stop showing the job
        return None, basis


def running_steps(job) -> None:
    """A running job as steps: done variants with their figures, the current one and its
    phase, the bar, the estimate counting down."""
    p = job.progress or {}
    done, left, basis = _steps(job)
    current = p.get("variant") or "preparing"
    total = steps_total(job)
    with st.status(status_label(job, len(done), total), expanded=True, state="running"):
        for variant in done:
            st.markdown(f":material/check_circle: **{md(variant.get('name'))}**: "
                        f"{md(headline(variant))}")
        st.markdown(f":material/progress_activity: **{md(current)}**: "
                    f"{md(p.get('phase') or 'starting')}")
        if total and total > len(done) + 1:
            st.caption(f"{total - len(done) - 1} more to come")
        st.progress(job_fraction(p),
                    text=countdown_text(left, elapsed_s(job), job_fraction(p), basis))


def job_status(job, current: bool = True) -> None:
    """Where a job stands, with the settings it runs with (read from the job, so a value the
    page did not send as chosen shows); a running one as steps; an error as st.error.
    ``current`` False: the form above has changed since this job, which has ended: one line
    says its results are of the previous settings ("Complete." would read as the form's)."""
    if not current and job.status not in ACTIVE:
        st.caption(f"Below: the previous run ({md(job.status)}), of other settings than the "
                   f"form's now. Run benchmark runs the form's.",
                   help=md(readback.settings_line(job.kind, job.payload)))
        return
    if job.status in ACTIVE:  # one compact line; every variant's settings on hover
        st.caption(md(readback.compact_line(job.kind, job.payload)),
                   help=md(readback.settings_line(job.kind, job.payload)))
    if job.status == "queued":
        ahead = job.position or 0
        st.info(f"Queued: place {ahead} in line. One job per device runs at a time so "
                f"timings do not disturb each other; this one starts when those ahead finish.")
    elif job.status == "running":
        running_steps(job)
    elif job.status == "complete":
        st.success("Complete.")
    elif job.status == "failed":
        st.error(f"The job failed: {md(said(job.error or 'no reason recorded'))}")
    elif job.status == "cancelled":
        st.warning("Cancelled. The variants finished before the cancel are kept.")
    elif job.status == "interrupted":
        st.warning(f"Interrupted: "
                   f"{md(said(job.error or 'its worker stopped before it finished'))}. "
                   f"The variants finished before are kept.")


def cancel_button(job, key: str) -> None:
    """Cancel for an active job of this session's owner; a refusal is one line."""
    if st.button("Cancel", key=key, help="A queued job is dropped at once; a running sweep "
                 "stops between phases (the variants already measured are kept), a "
                 "distributed run at once."):
        try:
            if state.cancel(job.job_id):
                st.toast("Cancelling." if job.status == "running" else "Cancelled.")
        except PermissionError as exc:
            st.error(md(exc))


def _variant_count(run_id: str | None) -> int:
    if not run_id:
        return 0
    return store().variant_count(run_id)


@st.fragment(run_every=POLL_S)
def poll_job(job_id: str) -> None:
    """Polled every POLL_S seconds while the job is active: shows its steps and a Cancel
    button; redraws the whole page when variants land (at most every REDRAW_S) or the job
    ends."""
    try:
        job = queue().get(job_id)
    except Exception as exc:
        st.error(f"Cannot read the job queue: {md(one_line(exc))}")
        return
    if job is None:
        st.warning("This job is no longer in the queue.")
        return
    seen_key = f"{SEEN_VARIANTS}:{job_id}"
    drawn_key = f"{seen_key}:drawn_at"
    count = _variant_count(job.run_id)
    # New variants redraw the page at most every REDRAW_S: each redraw renders every chart
    # again, and on a small machine that slowed other people's page loads while a sweep ran.
    landed = count != st.session_state.get(seen_key, count) and \
        time.monotonic() - st.session_state.get(drawn_key, 0.0) >= REDRAW_S
    if job.status not in ACTIVE or landed:
        st.session_state[seen_key] = count
        st.session_state[drawn_key] = time.monotonic()
        st.rerun(scope="app")
    job_status(job)
    cancel_button(job, key=f"cancel-{job_id}")


def track_job(job_id: str, current: bool = True):
    """Show a job: polled progress while active, final state otherwise (``job_status``'s
    ``current``). Returns the Job."""
    try:
        job = queue().get(job_id)
    except Exception as exc:
        st.error(f"Cannot read the job queue: {md(one_line(exc))}")
        return None
    if job is None:
        return None
    if job.status in ACTIVE:
        st.session_state[f"{SEEN_VARIANTS}:{job_id}"] = _variant_count(job.run_id)
        poll_job(job_id)
    else:
        job_status(job, current)
    return job


# -- My jobs -----------------------------------------------------------------------------------

def job_label(job) -> str:
    p = job.payload or {}
    if job.kind == "lm" and isinstance(p.get("sweep"), dict):  # its sweep says the model
        p = p["sweep"]
    what = f"{no_paths(p.get('model', '?'))} on {no_paths(p.get('dataset', '?'))}"
    if job.kind == "distributed":
        what += f", {'/'.join(map(str, p.get('workers') or []))} workers"
    return f"{job.kind} · {what} · {(job.submitted_at or '')[11:19]}"


def job_status_line(job) -> str:
    """Where a job stands, in My jobs' words: its place in the queue, its progress, or how
    it ended (with its one-line error)."""
    status = job.status
    if status == "queued":
        status += f", place {job.position}"
    elif status == "running":
        status += f": {progress_text(job)}"
    elif job.error:
        status += f": {said(job.error)}"
    return status


def my_jobs_lines(jobs) -> list[tuple[str, str]]:
    """My jobs as it lists them, (label, status) per job: any kind the queue ran, whatever
    its payload (a kind of another version, or one added by a module, reads the same)."""
    return [(job_label(job), job_status_line(job)) for job in jobs]


def my_jobs_panel() -> None:
    """Every job of this session's owner (the signed-in user, else the browser session):
    where each stands, and Cancel for those queued or running. Polled while any is."""
    try:
        jobs = state.my_jobs()
    except Exception as exc:
        st.caption(f"My jobs: cannot read the queue ({md(one_line(exc))})")
        return
    active = [j.job_id for j in jobs if j.status in ACTIVE]
    st.session_state[MY_JOBS_ACTIVE] = active
    st.fragment(_my_jobs, run_every=MY_JOBS_POLL_S if active else None)()


def _my_jobs() -> None:
    jobs = state.my_jobs()
    active = [j.job_id for j in jobs if j.status in ACTIVE]
    if active != st.session_state.get(MY_JOBS_ACTIVE):
        st.rerun(scope="app")  # a job started or ended: the pages show it too
    with st.expander(f"My jobs ({len(active)} active)", expanded=bool(active)):
        if not jobs:
            st.caption("None yet: a benchmark you run appears here.")
        for job, (label, status) in zip(jobs, my_jobs_lines(jobs)):
            st.markdown(f"**{md(label)}**  \n{md(status)}")
            if job.status in ACTIVE:
                cancel_button(job, key=f"myjobs-cancel-{job.job_id}")
