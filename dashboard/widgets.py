"""Widgets shared by pages: the device card, run labels and the store's run list. A job's
progress and My jobs live in ``jobs_view``, a run's results in ``results_view`` (its tables in
``tables``); their names are importable from here too, as the pages have always used them."""

from __future__ import annotations

import streamlit as st

from benchmarks.spec.cpu_env import variables_text
from dashboard import state
from dashboard.markup import md, no_paths
from dashboard.jobs_view import (  # noqa: F401  (the pages' names for them)
    ACTIVE,
    cancel_button,
    job_fraction,
    job_label,
    job_status,
    my_jobs_panel,
    poll_job,
    progress_text,
    track_job,
)
from dashboard.results_view import (  # noqa: F401
    export_panel,
    report_download,
    report_json,
    run_report,
)
from dashboard.state import POLL_S, SEEN_VARIANTS, one_line, queue, store, worker_card  # noqa: F401
from dashboard.tables import (  # noqa: F401
    PAIRED_CONFIG,
    TABLE_COLUMNS,
    frontier_table,
    paired_note,
    table_frame,
)


# -- device card -----------------------------------------------------------------------------

def device_card(card: dict | None, where=None) -> None:
    where = where or st
    if not card:
        _worker_starting()
        return
    text = (f"**{md(card.get('device_name') or 'device')}**  \n"
            f"devices: {md(', '.join(map(str, card.get('devices') or ['cpu'])))}  \n"
            f"torch {md(card.get('torch', '?'))} · {md(card.get('threads', '?'))} threads  \n"
            f"CPU: {md(card.get('cpu') or '?')}")
    for device, peaks in (card.get("peaks") or {}).items():
        # The store's figure under the same key, where a run has measured again since the
        # worker started (its roofline shows that one): the card's is the worker's start's.
        peaks = state.current_peaks(peaks)
        # Read from a stored row: its names and times are text, never Markdown.
        gemm = " · ".join(f"{md(k)} {v / 1e9:,.0f}" for k, v in peaks["gemm_flops_per_s"].items())
        threads = peaks.get("threads")
        at = f", {md(threads)} thread{'s' if threads != 1 else ''}" if threads else ""
        when = md(str(peaks.get("measured_at") or "")[:16].replace("T", " "))
        text += (f"  \npeaks ({md(device)}{at}{', measured ' + when + ' UTC' if when else ''}): "
                 f"{gemm} GFLOP/s · {peaks['memory_bytes_per_s'] / 1e9:,.1f} GB/s")
        theory = (peaks.get("theoretical") or {}).get("gemm_flops_per_s") or {}
        if theory:
            text += "  \ntheoretical: " + " · ".join(
                f"{k} {v / 1e9:,.0f}" for k, v in theory.items()) + " GFLOP/s"
    where.markdown(text)
    variables = variables_text(card.get("variables"))
    if variables:  # an inherited cap cleared, thread variables: what decides the kernels
        where.caption(f"Environment: {md(variables)}")
    if card.get("user") == "root" and state.serves_others():  # on a local run: noise
        where.caption("The worker runs as root (COMPRESSION_BENCH_WORKER_USER=root): model "
                      "files run with the server's rights.")
    cluster = card.get("cluster")
    if cluster:
        address, warning = state.cluster_exposure(cluster)
        if address:
            where.caption(f"Ray cluster at {md(address)}")
        where.markdown(cluster_text(cluster))
        if warning:
            where.warning(warning)


@st.fragment(run_every=state.POLL_S)
def _worker_starting() -> None:
    """Drawn only while the worker is starting: it polls, and once the worker's card is up
    the page is drawn again with it (the sidebar's card, the Experiment page's devices), so
    "starting" never outlives the start."""
    if state.worker_card("cpu") is not None:
        st.rerun(scope="app")
    st.caption("Worker: starting (its device card appears once it is up)")


def cluster_text(cluster: dict) -> str:
    """The Ray cluster the worker drives: its nodes and what is free on them."""
    if cluster.get("error"):
        return f"**Ray cluster**: {md(cluster['error'])}"
    lines = [f"**Ray cluster**: {len(cluster['nodes'])} node(s) · GPUs "
             f"{cluster['gpus_free']:g}/{cluster['gpus']:g} free · bench slots "
             f"{cluster['slots_free']:g}/{cluster['slots']:g} free"]
    for node in cluster["nodes"]:
        lines.append(f"- {md(node['id'])} ({md(node['address'])}): {node['cpus']:g} CPU, "
                     f"{node['gpus']:g} GPU, {node['slots']:g} slot(s)")
    return "  \n".join(lines[:1]) + "\n" + "\n".join(lines[1:])


def run_rows(run: dict) -> tuple[list, list[dict]]:
    """A stored run's variants and comparison rows, through the one run report."""
    from benchmarks.report.document import RunReport
    report = RunReport.from_stored(run)
    return report.variants, report.rows()


def run_label(run: dict) -> str:
    date = (run.get("created_at") or "")[:19].replace("T", " ")
    return (f"{date} · {no_paths(run.get('model'))} on {no_paths(run.get('dataset'))} · "
            f"{run.get('device') or '?'}"
            f" · {run.get('status')} · {_stored_variants(run)} variants")


def _stored_variants(run: dict) -> int:
    if run.get("variants") is not None:
        return len(run["variants"])
    return int(run.get("variant_count") or 0)


def from_store(read):
    """``read()``, what a page reads of the results store; where the store cannot be read,
    one line and the page stopped (a full disk: ``DiskFull``, its folder and free space),
    never a traceback. The server's paths are left out where others reach the server."""
    try:
        return read()
    except Exception as exc:
        line = one_line(exc)
        st.error(f"Cannot read the results store: "
                 f"{md(no_paths(line) if state.serves_others() else line)}")
        st.stop()


def stored_runs(empty_hint: str, *, limit: int, kind: str | None = None,
                owner: str | None = None) -> list[dict]:
    """Run summaries, newest first (a run's variants are read only when it is shown), all or
    one owner's. Stops the page with a message when the store cannot be read or holds none."""
    def read():
        store().mark_dead_runs()  # a CLI sweep killed meanwhile shows as interrupted
        return store().runs(limit=limit, kind=kind, with_variants=False, owner=owner)
    runs = from_store(read)
    if not runs:
        st.info(empty_hint)
        st.stop()
    return runs
