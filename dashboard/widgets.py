"""Widgets shared by pages: the device card, a job's progress, My jobs, a run's full report."""

from __future__ import annotations

import json
import time

import streamlit as st

from dashboard import charts, readback, state
from dashboard.state import POLL_S, SEEN_VARIANTS, one_line, queue, store, worker_card  # noqa: F401

ACTIVE = ("queued", "running")

# Columns of the comparison table, in reading order: each figure beside its change.
TABLE_COLUMNS = [
    "variant", "techniques", "device", "accuracy", "accuracy_shows", "accuracy_ci_low",
    "accuracy_ci_high", "accuracy_vs_base", "p_value_vs_base", "within_noise",
    "accuracy_seed_mean", "accuracy_seed_std", "accuracy_seed0", "gain_vs_control_pts",
    "p50_ms", "p50_ms_vs_base", "baseline_ref", "p90_ms", "p99_ms", "noisy", "launch_bound",
    "timing", "throughput", "throughput_sustained", "contention", "throughput_vs_base",
    "precision", "percent_of_peak", "above_peak",
    "peak_memory_mb", "peak_memory_mb_vs_base", "memory_method", "size_mb", "size_mb_vs_base",
    "size_gzip_mb", "size_gzip_mb_vs_base", "params", "nonzero_params",
    "nonzero_params_vs_base", "flops", "flops_effective", "flops_vs_base",
    "achieved_flops_per_s", "arithmetic_intensity", "bound", "error"]


# -- device card -----------------------------------------------------------------------------

def device_card(card: dict | None, where=None) -> None:
    where = where or st
    if not card:
        where.caption("Worker: starting (its device card appears once it is up)")
        return
    text = (f"**{card.get('device_name') or 'device'}**  \n"
            f"devices: {', '.join(card.get('devices') or ['cpu'])}  \n"
            f"torch {card.get('torch', '?')} · {card.get('threads', '?')} threads  \n"
            f"CPU: {card.get('cpu') or '?'}")
    for device, peaks in (card.get("peaks") or {}).items():
        gemm = " · ".join(f"{k} {v / 1e9:,.0f}" for k, v in peaks["gemm_flops_per_s"].items())
        text += (f"  \npeaks ({device}): {gemm} GFLOP/s · "
                 f"{peaks['memory_bytes_per_s'] / 1e9:,.1f} GB/s")
        theory = (peaks.get("theoretical") or {}).get("gemm_flops_per_s") or {}
        if theory:
            text += "  \ntheoretical: " + " · ".join(
                f"{k} {v / 1e9:,.0f}" for k, v in theory.items()) + " GFLOP/s"
    where.markdown(text)
    if card.get("user") == "root":
        where.caption("The worker runs as root (COMPRESSION_BENCH_WORKER_USER=root): model "
                      "files run with the server's rights.")
    cluster = card.get("cluster")
    if cluster:
        address, warning = state.cluster_exposure(cluster)
        if address:
            where.caption(f"Ray cluster at `{address}`")
        where.markdown(cluster_text(cluster))
        if warning:
            where.warning(warning)


def cluster_text(cluster: dict) -> str:
    """The Ray cluster the worker drives: its nodes and what is free on them."""
    if cluster.get("error"):
        return f"**Ray cluster**: {cluster['error']}"
    lines = [f"**Ray cluster**: {len(cluster['nodes'])} node(s) · GPUs "
             f"{cluster['gpus_free']:g}/{cluster['gpus']:g} free · bench slots "
             f"{cluster['slots_free']:g}/{cluster['slots']:g} free"]
    for node in cluster["nodes"]:
        lines.append(f"- {node['id']} ({node['address']}): {node['cpus']:g} CPU, "
                     f"{node['gpus']:g} GPU, {node['slots']:g} slot(s)")
    return "  \n".join(lines[:1]) + "\n" + "\n".join(lines[1:])


# -- a job's progress ------------------------------------------------------------------------

def job_fraction(progress: dict | None) -> float:
    p = progress or {}
    total, index = p.get("total") or 0, p.get("index")
    frac = p.get("fraction") or 0.0
    if not total or index is None or index < 0:
        return 0.0
    return min(1.0, max(0.0, (index + frac) / total))


def job_status(job) -> None:
    """One line (or bar) saying where a job stands, with the settings it runs with (read from
    the job, so a value the page did not send as chosen shows); an error as st.error."""
    if job.status in ACTIVE:
        st.caption(readback.settings_line(job.kind, job.payload))
    if job.status == "queued":
        ahead = job.position or 0
        st.info(f"Queued: place {ahead} in line. One job per device runs at a time so "
                f"timings do not disturb each other; this one starts when those ahead finish.")
    elif job.status == "running":
        st.progress(job_fraction(job.progress), text=f"Running: {progress_text(job)}" +
                    (" (cancelling…)" if job.cancel_requested else ""))
    elif job.status == "complete":
        st.success("Complete.")
    elif job.status == "failed":
        st.error(f"The job failed: {job.error or 'no reason recorded'}")
    elif job.status == "cancelled":
        st.warning("Cancelled. The variants finished before the cancel are kept.")
    elif job.status == "interrupted":
        st.warning(f"Interrupted: {job.error or 'its worker stopped before it finished'}. "
                   f"The variants finished before are kept.")


def progress_text(job) -> str:
    p = job.progress or {}
    return p.get("message") or (f"{p.get('variant', '')}: {p.get('phase', '')}".strip(": ")
                                or "starting")


def cancel_button(job, key: str) -> None:
    """Cancel for an active job of this session's owner; a refusal is one line."""
    if st.button("Cancel", key=key, help="A queued job is dropped at once; a running sweep "
                 "stops between phases (the variants already measured are kept), a "
                 "distributed run at once."):
        try:
            if state.cancel(job.job_id):
                st.toast("Cancelling." if job.status == "running" else "Cancelled.")
        except PermissionError as exc:
            st.error(str(exc))


def _variant_count(run_id: str | None) -> int:
    if not run_id:
        return 0
    return store().variant_count(run_id)


REDRAW_S = 4.0


@st.fragment(run_every=POLL_S)
def poll_job(job_id: str) -> None:
    """Polled every POLL_S seconds while the job is active: shows its progress and a Cancel
    button; redraws the whole page when variants land (at most every REDRAW_S) or the job
    ends."""
    try:
        job = queue().get(job_id)
    except Exception as exc:
        st.error(f"Cannot read the job queue: {one_line(exc)}")
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


# -- My jobs -------------------------------------------------------------------------------

MY_JOBS_POLL_S = 2.0
MY_JOBS_ACTIVE = "cb_my_jobs_active"


def job_label(job) -> str:
    p = job.payload or {}
    what = f"{p.get('model', '?')} on {p.get('dataset', '?')}"
    if job.kind == "distributed":
        what += f", {'/'.join(map(str, p.get('workers') or []))} workers"
    return f"{job.kind} · {what} · {(job.submitted_at or '')[11:19]}"


def my_jobs_panel() -> None:
    """Every job of this session's owner (the signed-in user, else the browser session):
    where each stands, and Cancel for those queued or running. Polled while any is."""
    try:
        jobs = state.my_jobs()
    except Exception as exc:
        st.caption(f"My jobs: cannot read the queue ({one_line(exc)})")
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
        for job in jobs:
            status = job.status
            if status == "queued":
                status += f", place {job.position}"
            elif status == "running":
                status += f": {progress_text(job)}"
            elif job.error:
                status += f": {job.error}"
            st.markdown(f"**{job_label(job)}**  \n{status}")
            if job.status in ACTIVE:
                cancel_button(job, key=f"myjobs-cancel-{job.job_id}")


# -- a run's report --------------------------------------------------------------------------

def run_rows(run: dict) -> tuple[list, list[dict]]:
    """A stored run's variants and comparison rows, through the one run report."""
    from benchmarks.report.document import RunReport
    report = RunReport.from_stored(run)
    return report.variants, report.rows()


def table_frame(rows: list[dict]):
    """The rows as a table: the variant, where it sits on each swept setting, then every
    figure beside its change, the rest after."""
    import pandas as pd  # imported on first use: the first page draws without it
    df = pd.DataFrame(rows)
    axes = [c for c in df.columns if c.startswith("axis:")]
    cols = ["variant", *axes] + [c for c in TABLE_COLUMNS[1:] if c in df.columns]
    return df[[c for c in cols if c in df.columns] +
              [c for c in df.columns if c not in cols]]


def report_json(run: dict) -> str:
    """The CLI's JSON contract: {"schema": 1, "environment": ..., "variants": [...]}."""
    from benchmarks.report.document import RunReport
    return json.dumps(RunReport.from_stored(run).document(), indent=2, default=str)


PAIRED_CONFIG = {
    "accuracy_a": st.column_config.NumberColumn("accuracy (first)", format="%.4f"),
    "accuracy_b": st.column_config.NumberColumn("accuracy (second)", format="%.4f"),
    "accuracy_change_pts": st.column_config.NumberColumn("Δ accuracy (pts)", format="%+.2f"),
    "p_value": st.column_config.NumberColumn("p (paired)", format="%.3f"),
    "within_noise": st.column_config.CheckboxColumn("within noise"),
    "p50_ms_a": st.column_config.NumberColumn("p50 ms (first)", format="%.3f"),
    "p50_ms_b": st.column_config.NumberColumn("p50 ms (second)", format="%.3f"),
    "p50_ratio": st.column_config.NumberColumn("p50 second/first", format="%.2fx"),
}


def paired_note(row: dict) -> str:
    """One sentence on a compared variant: is its accuracy change real?"""
    delta, p = row.get("accuracy_vs_base"), row.get("p_value_vs_base")
    if delta is None:
        return "No accuracy to compare."
    if p is None:
        return (f"Δ accuracy {delta:+.2f} points; no paired test: the two were not scored on "
                f"the same test examples.")
    verdict = "within noise" if p >= 0.05 else "a real difference"
    return (f"Δ accuracy {delta:+.2f} points, p = {p:.3g} (exact McNemar test on the same "
            f"test examples): {verdict}.")


def _ratio(label: str):
    return st.column_config.NumberColumn(label, format="%.2fx")


# Headers in words, numbers at a sensible precision (34,441 samples/s, not 34440.7098).
_TABLE_CONFIG = {
    "variant": st.column_config.TextColumn("Variant", pinned=True),
    "techniques": "Techniques", "device": "Ran on",
    "accuracy": st.column_config.NumberColumn("Accuracy", format="percent"),
    "accuracy_ci_low": st.column_config.NumberColumn("95% CI from", format="percent"),
    "accuracy_ci_high": st.column_config.NumberColumn("95% CI to", format="percent"),
    "accuracy_vs_base": st.column_config.NumberColumn("Δ accuracy (points)", format="%+.2f"),
    "p_value_vs_base": st.column_config.NumberColumn("p (paired, vs baseline)",
                                                     format="%.3f"),
    "within_noise": st.column_config.CheckboxColumn("Within noise"),
    "accuracy_seed_mean": st.column_config.NumberColumn("Accuracy, mean over seeds",
                                                        format="percent"),
    "accuracy_seed_std": st.column_config.NumberColumn("Std over seeds", format="percent"),
    "gain_vs_control_pts": st.column_config.NumberColumn("Gain over scratch twin (points)",
                                                         format="%+.2f"),
    "p50_ms": st.column_config.NumberColumn("Latency p50 (ms)", format="%.3f"),
    "p50_ms_vs_base": _ratio("Latency vs baseline"),
    "baseline_ref": "Latency compared with",
    "p90_ms": st.column_config.NumberColumn("p90 (ms)", format="%.3f"),
    "p99_ms": st.column_config.NumberColumn("p99 (ms)", format="%.3f"),
    "noisy": st.column_config.CheckboxColumn("Noisy latency"),
    "launch_bound": st.column_config.CheckboxColumn("Launch-bound"),
    "timing": "Timed",
    "throughput": st.column_config.NumberColumn("Samples/s (median call)",
                                                format="localized"),
    "throughput_sustained": st.column_config.NumberColumn(
        "Samples/s sustained", format="localized",
        help="samples timed / the wall time of the timed windows"),
    "contention": st.column_config.CheckboxColumn(
        "Contention", help="the sustained rate is more than 20% off the median call's"),
    "accuracy_shows": "Accuracy shown",
    "accuracy_seed0": st.column_config.NumberColumn("Accuracy, seed 0", format="percent"),
    "above_peak": st.column_config.CheckboxColumn(
        "Above its roof", help="above the measured peak even after it was measured again"),
    "throughput_vs_base": _ratio("Samples/s vs baseline"),
    "peak_memory_mb": st.column_config.NumberColumn("Peak memory (MB)", format="%.2f"),
    "peak_memory_mb_vs_base": _ratio("Memory vs baseline"),
    "memory_method": "Memory measured by",
    "size_mb": st.column_config.NumberColumn("Size (MB)", format="%.3f"),
    "size_mb_vs_base": _ratio("Size vs baseline"),
    "size_gzip_mb": st.column_config.NumberColumn("Gzipped (MB)", format="%.3f"),
    "size_gzip_mb_vs_base": _ratio("Gzipped vs baseline"),
    "params": st.column_config.NumberColumn("Parameters", format="localized"),
    "nonzero_params": st.column_config.NumberColumn("Non-zero parameters", format="localized"),
    "nonzero_params_vs_base": _ratio("Non-zero vs baseline"),
    "flops": st.column_config.NumberColumn("FLOPs per sample (dense)", format="localized"),
    "flops_effective": st.column_config.NumberColumn("FLOPs on non-zero weights",
                                                     format="localized"),
    "flops_vs_base": _ratio("Dense FLOPs vs baseline"),
    "precision": "Ran in", "percent_of_peak": st.column_config.NumberColumn(
        "% of peak", format="%.1f",
        help="achieved FLOP/s over the device's measured GEMM peak for this precision"),
    "achieved_flops_per_s": st.column_config.NumberColumn("Achieved FLOP/s",
                                                          format="compact"),
    "arithmetic_intensity": st.column_config.NumberColumn("FLOPs per byte moved",
                                                          format="%.2f"),
    "bound": "Roofline bound",
    "error": "Error",
}


def frontier_table(rows: list[dict], front: list[str]):
    """The Pareto frontier's variants, their figures formatted for reading."""
    import pandas as pd
    by_name = {r["variant"]: r for r in rows}

    def fmt(value, pattern):
        return "-" if value is None else pattern.format(value)
    return pd.DataFrame([{
        "Variant": name,
        "Accuracy": fmt(by_name[name].get("accuracy"), "{:.2%}"),
        "Δ points": fmt(by_name[name].get("accuracy_vs_base"), "{:+.2f}")
        + (" (noise)" if by_name[name].get("within_noise") else ""),
        "p50 ms": fmt(by_name[name].get("p50_ms"), "{:.3f}"),
        "vs baseline": fmt(by_name[name].get("p50_ms_vs_base"), "{:.2f}x"),
        "Size MB": fmt(by_name[name].get("size_mb"), "{:.3f}")} for name in front])


def run_report(run: dict, key: str, *, downloads: bool = True, details: bool = True) -> None:
    """Warnings, the four charts, trade-off curves, Pareto with its frontier, the roofline,
    the comparison table, sparsity, environment and downloads of one run. The charts are
    ``charts.run_figures``: the same list the HTML report holds."""
    from benchmarks.report.document import RunReport, table_notes
    report = RunReport.from_stored(run)
    rows = report.shown_rows()  # over seeds where there are several (seeds.shown_rows)
    if not rows:
        st.info("No variant has finished yet.")
        return
    for warning in report.warnings:
        st.warning(warning)
    st.caption(report.measurement_line())
    figs = charts.run_figures(report, rows)
    good = charts.ok_rows(rows)

    def draw(name: str) -> None:
        st.plotly_chart(figs[name], config=charts.PLOTLY_CONFIG, key=f"{key}-{name}")

    def draw_beside(name: str):
        """The chart on the left; returns the right-hand column for what explains it."""
        left, right = st.columns([3, 2])
        with left:
            draw(name)
        return right
    if good:
        for pair in (charts.FOUR[:2], charts.FOUR[2:]):  # a 2x2 grid: long names stay legible
            for col, name in zip(st.columns(2), pair):
                with col:
                    draw(name)
        noisy = [r["variant"] for r in good if r.get("noisy")]
        if noisy:
            st.warning(f"Noisy latency (IQR above 10% of the median; amber bars marked "
                       f"'noisy!'): {', '.join(noisy)}. Other work on the machine disturbed "
                       f"the timing; rerun before trusting small differences.")
        for name in figs:
            if name.startswith("curve:"):
                draw(name)
        if "pareto" not in figs:
            st.info("Latency is timed once every variant is built: the Pareto view follows.")
    if "pareto" in figs:
        with draw_beside("pareto"):
            st.markdown("**The Pareto frontier**: no other variant is both more accurate "
                        "and faster.")
            st.table(frontier_table(rows, charts.pareto_front_of(rows)))
    if "roofline" in figs:
        with draw_beside("roofline"):
            st.markdown("**Why each variant is as fast as it is.** Flat lines: the device's "
                        "measured GEMM peak per precision; slanted: its copy bandwidth times "
                        "the arithmetic intensity. A point under the slanted roof is "
                        "memory-bound (faster arithmetic, such as INT8's, buys little there); "
                        "one far below the flat roof leaves the kernels idle (small or "
                        "irregular shapes, overhead). The table's *% of peak* is the height "
                        "of each point against its precision's roof.")
    elif good and not report.peaks:
        st.caption("No device peaks were measured for this run (it was stored before they "
                   "were): no roofline.")
    if good:
        st.caption("Save any chart as PNG with the camera button of its toolbar (top right "
                   "of the chart; the browser renders it), or every chart at once in the "
                   "HTML report below.")
    failed = [r for r in rows if r.get("error")]
    if failed:
        st.warning("Failed variants (the others are complete):\n\n" + "\n".join(
            f"- **{r['variant']}**: {r['error']}" for r in failed))
    st.subheader("Comparison with the baseline")
    df = table_frame(rows)
    st.dataframe(df, hide_index=True, column_config=_TABLE_CONFIG, key=f"{key}-table")
    notes = table_notes(rows)  # the text table's: over seeds, contention, above a roof
    st.caption((notes[0] + ". " if notes and notes[0].startswith("acc %") else
                "Within noise: the accuracy change is not significant (exact McNemar test on "
                "the same test examples, p >= 0.05). ") +
               "Latency ratios are taken against the baseline timed on the same device, in "
               "the same interleaved rounds. % of peak: achieved FLOP/s against the device's "
               "measured peak for the precision the variant ran in. " +
               " ".join(n + "." for n in notes if n.startswith("! on")))
    if not details:
        return
    # Drawn when asked for: a collapsed expander would still render its chart on every visit.
    if "sparsity" in figs and st.toggle("Per-layer sparsity of pruned variants",
                                        key=f"{key}-show-sparsity"):
        draw("sparsity")
    with st.expander("Environment", expanded=False):
        st.json(run.get("environment", {}), expanded=True)
    if downloads:
        c1, c2, c3, _ = st.columns(4)
        c1.download_button("Download CSV", report.csv_text(), file_name=f"{key}.csv",
                           mime="text/csv", key=f"{key}-csv", on_click="ignore")
        c2.download_button("Download JSON", report_json(run), file_name=f"{key}.json",
                           mime="application/json", key=f"{key}-json", on_click="ignore")
        with c3:
            report_download(run, key)


def report_download(run: dict, key: str, compare: dict | None = None) -> None:
    """The "Download report" button: one self-contained HTML file (every chart, the table,
    the environment; plotly embedded, so it opens offline), built when clicked."""
    def build() -> str:
        from benchmarks.report.document import RunReport
        from benchmarks.report.html import render
        return render(RunReport.from_stored(run),
                      None if compare is None else RunReport.from_stored(compare))
    name = run.get("run_id") or key
    if compare is not None:
        name += f"-vs-{compare.get('run_id')}"
    st.download_button("Download report", build, file_name=f"report-{name}.html",
                       mime="text/html", key=f"{key}-html", on_click="ignore",
                       help="One HTML file with every chart, the comparison table and the "
                            "environment; it opens offline (plotly is embedded).")


def export_panel(run: dict, key: str) -> None:
    """Take a model away: a chosen variant exported by the worker (it rebuilds the model from
    the weights cache and writes safetensors, .pt2, ONNX and the model card), then downloaded
    as one zip. The page only submits and reads files: it never imports torch."""
    from benchmarks.export.files import CARD_NAME, archive_path, export_folder, used
    names = [v["name"] for v in run.get("variants") or [] if not v.get("error")]
    if run.get("kind", "sweep") != "sweep" or not names:
        return
    st.subheader("Take a model away")
    if not state.may_run_on(run):  # a shared link is read-only (the queue refuses it too)
        st.caption("Only the person who ran it can export this run's models: a shared link "
                   "shows the run and its report and CSV.")
        return
    variant = st.selectbox("Variant to export", names, key=f"{key}-export-variant",
                           help="Weights as safetensors with the architecture to rebuild them, "
                                "a torch.export .pt2, ONNX for float variants, and a model "
                                "card with its metrics and file hashes.")
    if st.button("Export model", key=f"{key}-export"):
        try:
            st.session_state[state.EXPORT_JOB_ID] = state.submit(
                "export", {"run_id": run["run_id"], "variant": variant},
                "cuda" if str(run.get("device") or "").startswith("cuda") else "cpu")
        except Exception as exc:
            st.error(f"Cannot queue the export: {one_line(exc)}")
    job_id = st.session_state.get(state.EXPORT_JOB_ID)
    job = queue().get(job_id) if job_id else None
    if job is None or job.payload.get("run_id") != run["run_id"]:
        return
    exported = job.payload["variant"]
    st.caption(f"Export of {exported}:")
    track_job(job_id)
    folder = export_folder(store().path, run["run_id"], exported, job_id)
    zipped = archive_path(folder)
    if job.status != "complete" or not zipped.is_file():
        if job.status == "complete":
            st.caption("This export was removed to make room for newer ones (the exports' "
                       "disk cap): export it again.")
        return
    card = json.loads((folder / CARD_NAME).read_text())
    st.table([{"format": name, "file": entry.get("file") or "-", "status": entry["status"],
               "why not": entry.get("reason") or "", "note": entry.get("note") or ""}
              for name, entry in card["formats"].items()])
    def data() -> bytes:
        used(folder.parent)  # the least recently used exports are the first to go
        return zipped.read_bytes()
    st.download_button(f"Download {exported} (zip)", data,
                       file_name=f"{run['run_id']}-{zipped.name}", mime="application/zip",
                       key=f"{key}-export-zip", on_click="ignore")


def run_label(run: dict) -> str:
    date = (run.get("created_at") or "")[:19].replace("T", " ")
    return (f"{date} · {run.get('model')} on {run.get('dataset')} · {run.get('device') or '?'}"
            f" · {run.get('status')} · {_stored_variants(run)} variants")


def _stored_variants(run: dict) -> int:
    if run.get("variants") is not None:
        return len(run["variants"])
    return int(run.get("variant_count") or 0)


def stored_runs(empty_hint: str, *, limit: int, kind: str | None = None,
                owner: str | None = None) -> list[dict]:
    """Run summaries, newest first (a run's variants are read only when it is shown), all or
    one owner's. Stops the page with a message when the store cannot be read or holds none."""
    try:
        store().mark_dead_runs()  # a CLI sweep killed meanwhile shows as interrupted
        runs = store().runs(limit=limit, kind=kind, with_variants=False, owner=owner)
    except Exception as exc:
        st.error(f"Cannot read the results store: {one_line(exc)}")
        st.stop()
    if not runs:
        st.info(empty_hint)
        st.stop()
    return runs
