"""One run's results, as the Results page (and the Experiment page, once its job ran) shows
them: the answer first (``answer_cards``), then tabs (Overview: the four charts; Curves: one
per swept setting; Pareto, with the roofline; Table; a tab per further view where the run has
its data; Environment), the downloads, and the selected variant: its details, per-layer
figures and export. Only the open tab is drawn. With a ``links.UrlForm``, the tab, the
variant and the margin travel in the URL.

A further view is a module with ``draw(run, key)`` (``dashboard/runtimes_view.py``,
``dashboard/sensitivity_view.py``): ``VIEWS`` names each with the test of whether a run has
its data, and its tab appears once the module exists; nothing here changes when one lands.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from dashboard import answer_cards, charts, links, recommend_panel, selection, state, tables
from dashboard.markup import md, no_paths, no_paths_in, shown_error, without_paths
from dashboard.state import POLL_S, one_line, queue, store

OVERVIEW, CURVES, PARETO, TABLE, ENVIRONMENT = ("Overview", "Curves", "Pareto", "Table",
                                                "Environment")


@dataclass(frozen=True)
class View:
    """A tab drawn by another module: shown where the module exists and the run has data."""

    label: str
    module: str
    applies: Callable[[dict], bool]


def has_runtimes(run: dict) -> bool:
    """A run with runtime cells: a variant timed in a runtime other than eager."""
    return any(isinstance(v.get("runtime"), dict) and v["runtime"].get("name") not in
               (None, "eager") for v in run.get("variants") or [])


def has_sensitivity(run: dict) -> bool:
    """A sweep (where to compress it: its maps, a new one, its variants' per-layer
    diagnostics) or a map itself."""
    return run.get("kind", "sweep") in ("sweep", "sensitivity")


VIEWS = [View("Runtimes", "dashboard.runtimes_view", has_runtimes),
         View("Sensitivity", "dashboard.sensitivity_view", has_sensitivity)]


def view_module(name: str):
    """The module, or None where it does not exist (yet); an error inside it still shows."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise


def further_views(run: dict) -> dict[str, Callable]:
    """{tab label: draw(run, key)} of the views this run has data for."""
    out = {}
    for view in VIEWS:
        if view.applies(run):
            module = view_module(view.module)
            if module is not None:
                out[view.label] = module.draw
    return out


def tab_labels(names: list[str], extra: dict) -> list[str]:
    """The tabs of a run whose figures are ``names`` (``charts.figure_names``)."""
    labels = [OVERVIEW]
    if any(name.startswith("curve:") for name in names):
        labels.append(CURVES)
    if "pareto" in names or "roofline" in names:
        labels.append(PARETO)
    return labels + [TABLE, *extra, ENVIRONMENT]


# -- a run still going ------------------------------------------------------------------------

REDRAW_S = 4.0  # a redraw renders every chart again: at most this often while a run lands


def _landed(run: dict | None) -> tuple | None:
    """What a redraw would change: the status, the variants stored, those timed (a variant
    measured in two passes is stored again, in place, once timed)."""
    if run is None:
        return None
    variants = run.get("variants") or []
    return (run.get("status"), len(variants),
            sum(1 for v in variants if v.get("latency_samples_ms")))


def follow(run: dict, key: str) -> None:
    """While ``run`` is going, the page updates itself: a fragment polls the store every
    POLL_S and redraws the page when a variant lands or is timed (at most every REDRAW_S)
    and once more when the run ends. A finished run draws no fragment: the polling stops
    with the run."""
    if run.get("status") != "running":
        return
    st.session_state[f"{key}-landed"] = _landed(run)
    _follow(run["run_id"], key)


@st.fragment(run_every=POLL_S)
def _follow(run_id: str, key: str) -> None:
    now = _landed(store().run(run_id))
    drawn_key = f"{key}-drawn-at"
    ended = now is None or now[0] != "running"
    if ended or (now != st.session_state.get(f"{key}-landed") and
                 time.monotonic() - st.session_state.get(drawn_key, 0.0) >= REDRAW_S):
        st.session_state[drawn_key] = time.monotonic()
        st.rerun(scope="app")
    st.caption(":material/autorenew: This run is still going: the page updates itself as "
               "variants land.")


# -- the view ----------------------------------------------------------------------------------

def run_report(run: dict, key: str, *, url=None, export: bool = False,
               downloads: bool = True) -> None:
    """The answer, the tabs, the downloads and the selected variant of one run. The charts
    are ``charts.run_figures``: the same list the HTML report holds."""
    from benchmarks.report.document import RunReport
    if run.get("kind") == "lm":  # a language model's cells, in its terms
        from dashboard import lm_view
        lm_view.draw(run, key)
        return
    own = state.owns(run)  # its owner sees errors and settings whole; others, no server path
    if not own:  # the page, its figures and its downloads alike
        run = without_paths(run)
    report = RunReport.from_stored(run)
    rows = report.shown_rows()  # over seeds where there are several (seeds.shown_rows)
    if not rows:
        st.info("No variant has finished yet.")
        return
    answer = answer_cards.cards(run, report, rows, key, url)  # certified for a recommend run
    if run.get("recommendation"):  # then its certificate: the candidates, the trials
        recommend_panel.show(run, key=f"{key}-rec")
    for warning in report.warnings:
        st.warning(md(warning))
    failed = [r for r in rows if r.get("error")]
    if failed:
        st.warning("Failed variants (the others are complete):\n\n" + "\n".join(
            f"- **{md(r['variant'])}**: {shown_error(r['error'], own)}" for r in failed))
    names = [r["variant"] for r in rows]
    chosen = _selected(key, names, answer.variant or _first_variant(rows), url)
    names_of_figures = charts.figure_names(report, rows)  # built by the tab that shows them
    extra = further_views(run)
    labels = tab_labels(names_of_figures, extra)
    tab_key = f"{key}-tab"
    if st.session_state.get(tab_key, OVERVIEW) not in labels:
        st.session_state[tab_key] = OVERVIEW  # a tab this run no longer has
    first = OVERVIEW if url is None else url.initial(
        "tab", tab_key, lambda t: links.parse_choice(t, labels, "a tab of this run"), OVERVIEW)
    drawers = {OVERVIEW: _overview, CURVES: _curves, PARETO: _pareto, TABLE: _table,
               ENVIRONMENT: lambda *drawn: _environment(*drawn, own=own)}
    for label, container in zip(labels, st.tabs(labels, default=first, key=tab_key,
                                                 on_change="rerun")):
        if container.open is False:
            continue  # only the open tab is drawn: a hidden chart still costs its render
        with container:
            if label in extra:
                extra[label](run, key)
            else:
                drawers[label](report, rows, names_of_figures, key)
    if url is not None:
        url.keep("tab", st.session_state.get(tab_key) or first, OVERVIEW)
        url.keep("variant", chosen)
    if downloads:
        download_row(run, report, key)
    variant_details(report, rows, chosen, key, own)
    if export and state.export_allowed(run):
        export_panel(run, key, chosen)


def _first_variant(rows: list[dict]) -> str | None:
    from benchmarks.report.style import is_baseline
    return next((r["variant"] for r in rows if not is_baseline(r) and not r.get("error")
                 and not r.get("not_applicable")), rows[0]["variant"])


def _selected(key: str, names: list[str], default: str | None, url) -> str | None:
    if url is not None and selection.state_key(key) not in st.session_state:
        # The link's variant, once: later picks (a click, the menu) are the person's.
        selection.pick(key, url.initial("variant", selection.state_key(key),
                                        lambda t: links.parse_choice(
                                            t, names, "a variant of this run"), None))
    return selection.selected(key, names, default)


def _chart(fig, name: str, key: str, on_select=None) -> None:
    extra = {} if on_select is None else dict(on_select=on_select, selection_mode="points")
    charts.show(fig, key=f"{key}-{name}", **extra)


def _figures(report, rows, names, wanted) -> dict:
    only = frozenset(n for n in names if wanted(n))
    # The key is what the figures are drawn from, and nothing else: a run still landing
    # variants gets new figures as each lands; another session on the same data, the same.
    drawn_from = [rows, report.peaks, charts.sparse_layers(report) if "sparsity" in only
                  else None]
    fingerprint = hashlib.sha256(json.dumps(drawn_from, sort_keys=True, default=str)
                                 .encode()).hexdigest()
    return _built_figures(fingerprint, only, report, rows)


@st.cache_resource(max_entries=64, show_spinner=False)
def _built_figures(fingerprint: str, only: frozenset, _report, _rows) -> dict:
    """The figures of one fingerprint, shared by every rerun and session that shows them:
    building the four of a 20-variant run was half the Results page's script. Kept as
    objects (drawing only reads a figure, and ``charts.show`` escapes its text once), not
    pickled copies: a copy is rebuilt through the same validation that made building slow."""
    return charts.run_figures(_report, _rows, only=set(only))


def _overview(report, rows, names, key) -> None:
    st.caption(md(report.measurement_line()))  # the model's path and the machine's names
    good = charts.ok_rows(rows)
    if not good:
        st.info("Every variant failed: nothing to chart.")
        return
    figs = _figures(report, rows, names, lambda n: n in charts.FOUR)
    for pair in (charts.FOUR[:2], charts.FOUR[2:]):  # a 2x2 grid: long names stay legible
        for col, name in zip(st.columns(2), pair):
            with col:
                _chart(figs[name], name, key)
    noisy = [r["variant"] for r in good if r.get("noisy")]
    if noisy:
        st.warning(f"Noisy latency (hatched bars; IQR above 10% of the median): "
                   f"{md(', '.join(noisy))}. Other work on the machine disturbed the timing; "
                   f"rerun before trusting small differences.")
    if "pareto" not in names:
        st.info("Latency is timed once every variant is built: the Pareto view follows.")
    # Drawn when asked for: a heatmap of every pruned variant's layers is a big chart.
    if "sparsity" in names and st.toggle("Per-layer sparsity of every pruned variant",
                                         key=f"{key}-show-sparsity"):
        _chart(_figures(report, rows, names, lambda n: n == "sparsity")["sparsity"],
               "sparsity", key)
    st.caption("Save any chart as PNG with the camera button of its toolbar (top right of "
               "the chart; the browser renders it), or every chart at once in the HTML "
               "report below.")


def _curves(report, rows, names, key) -> None:
    for name, fig in _figures(report, rows, names, lambda n: n.startswith("curve:")).items():
        _chart(fig, name, key)


def _beside(fig, name: str, key: str, on_select=None):
    left, right = st.columns([3, 2])
    with left:
        _chart(fig, name, key, on_select)
    return right


def _pareto(report, rows, names, key) -> None:
    figs = _figures(report, rows, names, lambda n: n in ("pareto", "roofline"))
    if "pareto" in figs:
        with _beside(figs["pareto"], "pareto", key,
                     selection.on_chart(key, f"{key}-pareto")):
            st.markdown("**The Pareto frontier**: no other variant is both more accurate "
                        "and faster. Click a point to select its variant.")
            st.table(tables.frontier_table(rows, charts.pareto_front_of(rows)))
    if "roofline" in figs:
        with _beside(figs["roofline"], "roofline", key):
            st.markdown("**Why each variant is as fast as it is.** Flat lines: the device's "
                        "measured GEMM peak per precision; slanted: its copy bandwidth times "
                        "the arithmetic intensity. A point under the slanted roof is "
                        "memory-bound (faster arithmetic, such as INT8's, buys little there); "
                        "one far below the flat roof leaves the kernels idle (small or "
                        "irregular shapes, overhead). The table's *% of peak* is the height "
                        "of each point against its precision's roof.")
    elif not report.peaks:
        st.caption("No device peaks were measured for this run (it was stored before they "
                   "were): no roofline.")


def _table(report, rows, names, key) -> None:
    table_key = f"{key}-table"
    names = [r["variant"] for r in rows]
    tables.comparison_table(rows, table_key, selection.on_table(key, table_key, names))
    from benchmarks.report.document import table_notes
    notes = table_notes(rows)  # the text table's: over seeds, contention, above a roof
    st.caption("Click a row to select its variant. " +
               (md(notes[0]) + ". " if notes and notes[0].startswith("acc %") else
                "Within noise: the accuracy change is not significant (the paired test on "
                "the same test examples, p >= 0.05; Δ 95% CI is from the same test). ") +
               "Latency ratios are taken against the baseline timed on the same device, in "
               "the same interleaved rounds. % of peak: achieved FLOP/s against the device's "
               "measured peak for the precision the variant ran in. — : the figure does not "
               "apply. " + " ".join(md(n) + "." for n in notes if n.startswith("! on")))


def _environment(report, rows, names, key, own: bool = True) -> None:
    st.caption(md(report.measurement_line()))
    # Its owner sees where their files were; a shared link does not show the server's paths.
    from benchmarks.report.formats import readable
    shown = report.environment if own else no_paths_in(report.environment)
    st.json(readable(shown), expanded=True)  # floats to four decimals at most


# -- below the tabs ----------------------------------------------------------------------------

def download_row(run: dict, report, key: str) -> None:
    c1, c2, c3, _ = st.columns(4)
    # Built when clicked, as the HTML report is: on every rerun they cost the page's script
    # a sixth of its time.
    c1.download_button("Download CSV", report.csv_text, file_name=f"{key}.csv",
                       mime="text/csv", key=f"{key}-csv", on_click="ignore")
    c2.download_button("Download JSON", lambda: report_json(run), file_name=f"{key}.json",
                       mime="application/json", key=f"{key}-json", on_click="ignore")
    with c3:
        report_download(run, key)


def variant_details(report, rows: list[dict], name: str | None, key: str,
                    own: bool = True) -> None:
    """The selected variant: its figures, its settings, its per-layer figures."""
    variant = next((v for v in report.variants if v.name == name), None)
    if variant is None:
        return
    row = next(r for r in rows if r["variant"] == name)
    st.subheader(f"Selected: {md(name)}")
    st.caption("Select another with a click on a row of the Table tab or a point of the "
               "Pareto chart, or in the export menu below.")
    left, right = st.columns([2, 3])
    with left:
        st.markdown(_summary(row))
        config = variant.config or {"techniques": "none: the baseline"}
        st.json(config if own else no_paths_in(config), expanded=False)
    if variant.cost.layer_sparsity:
        with right:
            _chart(charts.layer_chart(name, variant.cost.layer_sparsity), "layers", key)


def _summary(row: dict) -> str:
    def fmt(value, pattern):
        return tables.NOT_APPLICABLE if value is None else pattern.format(value)
    return "  \n".join([
        f"Accuracy {fmt(row.get('accuracy'), '{:.2%}')} "
        f"(Δ {fmt(row.get('accuracy_vs_base'), '{:+.2f}')} points"
        + (", within noise" if row.get("within_noise") else "") + ")",
        f"Latency p50 {fmt(row.get('p50_ms'), '{:.3f}')} ms "
        f"({fmt(row.get('p50_ms_vs_base'), '{:.2f}x')} the baseline's)",
        f"Size {fmt(row.get('size_mb'), '{:.3f}')} MB · peak memory "
        f"{md(tables.memory_text(row))}"])


def report_json(run: dict) -> str:
    """The CLI's JSON contract: {"schema": 1, "environment": ..., "variants": [...]}."""
    from benchmarks.report.document import RunReport
    return json.dumps(RunReport.from_stored(run).document(), indent=2, default=str)


def report_download(run: dict, key: str, compare: dict | None = None) -> None:
    """The "Download report" button: one self-contained HTML file (every chart, the table,
    the environment; plotly embedded, so it opens offline), built when clicked."""
    def build() -> str:
        from benchmarks.report.document import RunReport
        from benchmarks.views.html import render
        return render(RunReport.from_stored(run),
                      None if compare is None else RunReport.from_stored(compare))
    name = run.get("run_id") or key
    if compare is not None:
        name += f"-vs-{compare.get('run_id')}"
    st.download_button("Download report", build, file_name=f"report-{name}.html",
                       mime="text/html", key=f"{key}-html", on_click="ignore",
                       help="One HTML file with every chart, the comparison table and the "
                            "environment; it opens offline (plotly is embedded).")


def export_panel(run: dict, key: str, chosen: str | None = None) -> None:
    """Take a model away: the selected variant exported by the worker (it rebuilds the model
    from the weights cache and writes safetensors, .pt2, ONNX and the model card), then
    downloaded as one zip. The page only submits and reads files: it never imports torch."""
    from benchmarks.export.files import CARD_NAME, archive_path, export_folder
    from benchmarks.spec import nofollow
    from dashboard.jobs_view import track_job
    names = [v["name"] for v in run.get("variants") or [] if not v.get("error")
             and not v.get("not_applicable")]
    if run.get("kind", "sweep") != "sweep" or not names:
        return
    st.subheader("Take a model away")
    if not state.may_run_on(run, "export"):  # a shared link is read-only (so is the queue)
        st.caption("Only the person who ran it can export this run's models: a shared link "
                   "shows the run and its report and CSV.")
        if run.get("owner_unverified"):  # its owner's signature does not verify
            st.caption("Ownership unverifiable: this run's owner is not one the server "
                       "signed (rewritten in the store, or stored before owners were "
                       "signed), so it is read-only for everyone.")
        return
    menu_key = f"{key}-export-variant"
    if chosen in names:
        st.session_state[menu_key] = chosen  # the page's selection, however it was made
    variant = st.selectbox("Variant to export", names, key=menu_key,
                           on_change=selection.on_menu(key, menu_key),
                           help="Weights as safetensors with the architecture to rebuild them, "
                                "a torch.export .pt2, ONNX for float variants, and a model "
                                "card with its metrics and file hashes.")
    if st.button("Export model", key=f"{key}-export"):
        try:
            st.session_state[state.EXPORT_JOB_ID] = state.submit(
                "export", {"run_id": run["run_id"], "variant": variant},
                "cuda" if str(run.get("device") or "").startswith("cuda") else "cpu")
        except Exception as exc:
            st.error(f"Cannot queue the export: {md(one_line(exc))}")
    job_id = st.session_state.get(state.EXPORT_JOB_ID)
    job = queue().get(job_id) if job_id else None
    if job is None or job.payload.get("run_id") != run["run_id"]:
        return
    exported = job.payload["variant"]
    st.caption(f"Export of {md(exported)}:")
    track_job(job_id)
    if job.status != "complete":
        return
    # The worker's user writes these files, and job code may swap one for a link (to the
    # server's secret) at any moment: each is opened without following a link, checked to be
    # a file of the worker's, and read through that descriptor.
    top, owners = store().path.parent, queue().worker_uids()
    folder = export_folder(store().path, run["run_id"], exported, job_id)
    zipped = archive_path(folder)
    try:
        card = json.loads(nofollow.read_bytes(folder / CARD_NAME, top, owners))
        nofollow.open_file(zipped, top, owners).close()
    except FileNotFoundError:
        st.caption("This export was removed to make room for newer ones (the exports' "
                   "disk cap): export it again.")
        return
    except (nofollow.Refused, ValueError) as exc:
        st.error(f"This export's files were refused: {md(no_paths(one_line(exc)))}")
        return
    st.table(tables.export_rows(card))
    def data() -> bytes:
        nofollow.touch_folder(folder.parent, top, owners)  # least recently used go first
        return nofollow.read_bytes(zipped, top, owners)
    st.download_button(f"Download {exported} (zip)", data,
                       file_name=f"{run['run_id']}-{zipped.name}", mime="application/zip",
                       key=f"{key}-export-zip", on_click="ignore")
