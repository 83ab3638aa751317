"""Widgets shared by pages: the device card, a job's progress, a run's full report."""

from __future__ import annotations

import json

import streamlit as st

from . import charts
from .state import POLL_S, SEEN_VARIANTS, one_line, queue, store

ACTIVE = ("queued", "running")

# Columns of the comparison table, in reading order: each figure beside its change.
TABLE_COLUMNS = [
    "variant", "techniques", "device", "accuracy", "accuracy_vs_base", "p50_ms",
    "p50_ms_vs_base", "p90_ms", "p99_ms", "noisy", "throughput", "throughput_vs_base",
    "peak_memory_mb", "peak_memory_mb_vs_base", "memory_method", "size_mb", "size_mb_vs_base",
    "size_gzip_mb", "size_gzip_mb_vs_base", "params", "nonzero_params",
    "nonzero_params_vs_base", "flops", "flops_vs_base", "error"]


# -- device card -----------------------------------------------------------------------------

def device_card(card: dict | None, where=None) -> None:
    where = where or st
    if not card:
        where.caption("Worker: starting (its device card appears once it is up)")
        return
    where.markdown(f"**{card.get('device_name') or 'device'}**  \n"
                   f"devices: {', '.join(card.get('devices') or ['cpu'])}  \n"
                   f"torch {card.get('torch', '?')} · {card.get('threads', '?')} threads  \n"
                   f"CPU: {card.get('cpu') or '?'}")


def worker_card(device: str = "cpu") -> dict | None:
    try:
        return queue().worker_card(device)
    except Exception:
        return None


# -- a job's progress ------------------------------------------------------------------------

def job_fraction(progress: dict | None) -> float:
    p = progress or {}
    total, index = p.get("total") or 0, p.get("index")
    frac = p.get("fraction") or 0.0
    if not total or index is None or index < 0:
        return 0.0
    return min(1.0, max(0.0, (index + frac) / total))


def job_status(job) -> None:
    """One line (or bar) saying where a job stands; an error as st.error."""
    if job.status == "queued":
        ahead = job.position or 0
        st.info(f"Queued: place {ahead} in line. One job per device runs at a time so "
                f"timings do not disturb each other; this one starts when those ahead finish.")
    elif job.status == "running":
        p = job.progress or {}
        text = p.get("message") or (f"{p.get('variant', '')}: {p.get('phase', '')}".strip(": ")
                                    or "starting")
        st.progress(job_fraction(p), text=f"Running: {text}")
    elif job.status == "complete":
        st.success("Complete.")
    elif job.status == "failed":
        st.error(f"The job failed: {job.error or 'no reason recorded'}")
    elif job.status == "cancelled":
        st.warning("Cancelled. The variants finished before the cancel are kept.")
    elif job.status == "interrupted":
        st.warning(f"Interrupted: {job.error or 'its worker stopped before it finished'}. "
                   f"The variants finished before are kept.")


def _variant_count(run_id: str | None) -> int:
    if not run_id:
        return 0
    run = store().run(run_id)
    return len(run["variants"]) if run else 0


@st.fragment(run_every=POLL_S)
def poll_job(job_id: str) -> None:
    """Polled every POLL_S seconds while the job is active: shows its progress and a Cancel
    button; redraws the whole page when a variant lands or the job ends."""
    try:
        job = queue().get(job_id)
    except Exception as exc:
        st.error(f"Cannot read the job queue: {one_line(exc)}")
        return
    if job is None:
        st.warning("This job is no longer in the queue.")
        return
    seen_key = f"{SEEN_VARIANTS}:{job_id}"
    count = _variant_count(job.run_id)
    if job.status not in ACTIVE or count != st.session_state.get(seen_key, count):
        st.session_state[seen_key] = count
        st.rerun(scope="app")
    st.session_state[seen_key] = count
    job_status(job)
    if st.button("Cancel", key=f"cancel-{job_id}",
                 help="Stops between phases; the variants already measured are kept."):
        if queue().cancel(job_id):
            st.toast("Cancelling: the job stops at the end of its current phase.")


def track_job(job_id: str):
    """Show a job: polled progress while active, final state otherwise. Returns the Job."""
    try:
        job = queue().get(job_id)
    except Exception as exc:
        st.error(f"Cannot read the job queue: {one_line(exc)}")
        return None
    if job is None:
        return None
    if job.status in ACTIVE:
        st.session_state[f"{SEEN_VARIANTS}:{job_id}"] = _variant_count(job.run_id)
        poll_job(job_id)
    else:
        job_status(job)
    return job


# -- a run's report --------------------------------------------------------------------------

def run_rows(run: dict) -> tuple[list, list[dict]]:
    from benchmarks.results import VariantResult, comparison_rows
    results = [VariantResult.from_dict(v) for v in run.get("variants", [])]
    return results, comparison_rows(results)


def pareto(rows: list[dict]) -> list[str]:
    from benchmarks.results import pareto_front
    pts = [(r["variant"], r["accuracy"], r["p50_ms"]) for r in charts.ok_rows(rows)
           if charts._num(r.get("accuracy")) is not None
           and charts._num(r.get("p50_ms")) is not None]
    return pareto_front(pts)


def table_frame(rows: list[dict]):
    import pandas as pd  # imported on first use: the first page draws without it
    df = pd.DataFrame(rows)
    cols = [c for c in TABLE_COLUMNS if c in df.columns]
    return df[cols + [c for c in df.columns if c not in cols]]


def report_json(run: dict) -> str:
    """The CLI's JSON contract: {"schema": 1, "environment": ..., "variants": [...]}."""
    return json.dumps({"schema": 1, "environment": run.get("environment", {}),
                       "variants": run.get("variants", [])}, indent=2, default=str)


_TABLE_CONFIG = {
    "accuracy": st.column_config.NumberColumn("accuracy", format="%.4f"),
    "accuracy_vs_base": st.column_config.NumberColumn("Δ acc (pts)", format="%+.2f"),
    "p50_ms": st.column_config.NumberColumn("p50 ms", format="%.3f"),
    "p90_ms": st.column_config.NumberColumn("p90 ms", format="%.3f"),
    "p99_ms": st.column_config.NumberColumn("p99 ms", format="%.3f"),
    "noisy": st.column_config.CheckboxColumn("noisy latency"),
    **{f"{k}_vs_base": st.column_config.NumberColumn(f"{k} vs base", format="%.2fx")
       for k in ("p50_ms", "throughput", "peak_memory_mb", "size_mb", "size_gzip_mb",
                 "nonzero_params", "flops")},
}


def run_report(run: dict, key: str, *, downloads: bool = True, details: bool = True) -> None:
    """Charts, Pareto, comparison table, sparsity, environment, downloads of one run."""
    results, rows = run_rows(run)
    if not rows:
        st.info("No variant has finished yet.")
        return
    good = charts.ok_rows(rows)
    if good:
        figs = [("acc", charts.accuracy_chart(rows)), ("lat", charts.latency_chart(rows)),
                ("mem", charts.memory_chart(rows)), ("size", charts.size_chart(rows))]
        for col, (name, fig) in zip(st.columns(4), figs):
            with col:
                st.plotly_chart(fig, config=charts.PLOTLY_CONFIG, key=f"{key}-{name}")
        noisy = [r["variant"] for r in good if r.get("noisy")]
        if noisy:
            st.warning(f"Noisy latency (IQR above 10% of the median; amber bars marked "
                       f"'noisy!'): {', '.join(noisy)}. Other work on the machine disturbed "
                       f"the timing; rerun before trusting small differences.")
        st.plotly_chart(charts.pareto_chart(rows, pareto(rows)), config=charts.PLOTLY_CONFIG,
                        key=f"{key}-pareto")
        st.caption("Save any chart as PNG with the camera button of its toolbar (top right "
                   "of the chart; the browser renders it).")
    failed = [r for r in rows if r.get("error")]
    if failed:
        st.warning("Failed variants (the others are complete):\n\n" + "\n".join(
            f"- **{r['variant']}**: {r['error']}" for r in failed))
    st.subheader("Comparison with the baseline")
    df = table_frame(rows)
    st.dataframe(df, hide_index=True, column_config=_TABLE_CONFIG, key=f"{key}-table")
    if not details:
        return
    pruned = [r for r in results if r.layer_sparsity and "prune" in r.techniques]
    if pruned:
        with st.expander("Per-layer sparsity of pruned variants", expanded=False):
            st.plotly_chart(charts.sparsity_chart({r.name: r.layer_sparsity for r in pruned}),
                            config=charts.PLOTLY_CONFIG, key=f"{key}-sparsity")
    with st.expander("Environment", expanded=False):
        st.json(run.get("environment", {}), expanded=True)
    if downloads:
        c1, c2, _ = st.columns([1, 1, 4])
        c1.download_button("Download CSV", df.to_csv(index=False), file_name=f"{key}.csv",
                           mime="text/csv", key=f"{key}-csv", on_click="ignore")
        c2.download_button("Download JSON", report_json(run), file_name=f"{key}.json",
                           mime="application/json", key=f"{key}-json", on_click="ignore")


def run_label(run: dict) -> str:
    date = (run.get("created_at") or "")[:19].replace("T", " ")
    return (f"{date} · {run.get('model')} on {run.get('dataset')} · {run.get('device') or '?'}"
            f" · {run.get('status')} · {_stored_variants(run)} variants")


def _stored_variants(run: dict) -> int:
    if run.get("variants") is not None:
        return len(run["variants"])
    return int(run.get("variant_count") or 0)


def stored_runs(empty_hint: str, *, limit: int, kind: str | None = None) -> list[dict]:
    """Run summaries, newest first (a run's variants are read only when it is shown). Stops the
    page with a message when the store cannot be read or holds nothing yet."""
    try:
        store().mark_dead_runs()  # a CLI sweep killed meanwhile shows as interrupted
        runs = store().runs(limit=limit, kind=kind, with_variants=False)
    except Exception as exc:
        st.error(f"Cannot read the results store: {one_line(exc)}")
        st.stop()
    if not runs:
        st.info(empty_hint)
        st.stop()
    return runs
