"""History: everyone's past runs (one click opens any, read-only, on the Results page); a
model's trend across runs with the changes bigger than their noise flagged; compare two runs
or two variants and download their HTML report; delete a run of your own."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from benchmarks.report.formats import display_rows  # the one formatting layer
from benchmarks.run.estimate import actual_seconds, estimated_seconds, shown_kind
from dashboard import history_view, shell, state, tables, widgets
from dashboard.markup import md, no_paths

shell.standalone()

st.title("History")
flash = st.session_state.pop("history_flash", None)
if flash:
    st.success(flash)

runs = widgets.stored_runs("No stored runs yet.", limit=500)

by_id = {r["run_id"]: r for r in runs}
me, admin = state.owner(), state.is_admin()
st.dataframe(pd.DataFrame([{
    "run": r["run_id"],
    "open": history_view.results_link(r),
    # A model file or an image folder by its name in the operator's folder, never its path.
    "yours": r.get("owner") == me, "kind": shown_kind(r), "model": no_paths(r["model"]),
    "dataset": no_paths(r["dataset"]), "device": r.get("device"),
    "date": (r["created_at"] or "")[:19].replace("T", " "), "status": r["status"],
    "variants": r["variant_count"], "took_s": actual_seconds(r),
    "estimated_s": estimated_seconds(r),
    "error": no_paths(r["error"]) if r.get("error") else None,
    # An owner the server did not sign (rewritten in the store): nobody's, and said so.
    **({"ownership": "unverifiable"} if r.get("owner_unverified") else {})}
    for r in runs]), hide_index=True, key="history_table", placeholder=tables.NOT_APPLICABLE,
    column_config={"run": "Run", "kind": "Kind", "model": "Model", "dataset": "Data set",
                   "device": "Ran on", "date": "Started (UTC)", "status": "Status",
                   "variants": "Variants", "error": "Error", "ownership": "Ownership",
                   "open": st.column_config.LinkColumn("Open", display_text="results ↗"),
                   "yours": st.column_config.CheckboxColumn("Yours"),
                   # The estimate shown when the run started beside what it took: its error.
                   "took_s": st.column_config.NumberColumn("Took (s)", format="%.0f"),
                   "estimated_s": st.column_config.NumberColumn(
                       "Estimated (s)", format="%.0f", help="The estimate when the run "
                       "started, from earlier runs here (empty: none to estimate from)")})

st.subheader("Trend")
unreadable_shown: set[str] = set()  # each unreadable row's line once on this page
history_view.trend_section(runs, unreadable_shown)

st.subheader("Compare")
mode = st.radio("Compare", ["two runs", "two variants"], horizontal=True, key="history_mode",
                label_visibility="collapsed")
ids = list(by_id)


loaded_full: dict[str, dict] = {}


def full(run_id: str) -> dict:
    """A run with its variants, read once per page run; a stored row left out as unreadable
    is one warning line."""
    if run_id not in loaded_full:
        loaded_full[run_id] = state.store().run(run_id) or {**by_id[run_id], "variants": []}
        history_view.unreadable_warning(loaded_full[run_id], unreadable_shown)
    return loaded_full[run_id]


if mode == "two runs":
    picked = st.multiselect("Pick two runs", ids, default=ids[:2] if len(ids) >= 2 else ids,
                            max_selections=2, format_func=lambda i: widgets.run_label(by_id[i]),
                            key="history_runs")
    if len(picked) == 2:
        loaded_runs = [full(rid) for rid in picked]
        if all(r.get("kind", "sweep") == "sweep" for r in loaded_runs):
            from benchmarks.report.document import RunReport, compare_runs
            shared = compare_runs(*(RunReport.from_stored(r) for r in loaded_runs))
            if shared:
                st.markdown("**The variants both runs have** (change from the first to the "
                            "second; its interval and p: one paired test on the same examples)")
                st.dataframe(display_rows(shared), hide_index=True, key="history-shared")
        for col, rid in zip(st.columns(2), picked):
            run = loaded_runs[picked.index(rid)]
            with col:
                st.markdown(f"**{md(widgets.run_label(run))}**")
                if run.get("kind", "sweep") == "sweep":
                    _, rows = widgets.run_rows(run)
                    tables.comparison_table(rows, key=f"history-cmp-{rid}")
                else:  # a distributed or recipe run: its records, formatted
                    st.dataframe(display_rows(run["variants"]), hide_index=True,
                                 key=f"history-cmp-{rid}")
    else:
        st.caption("Pick two runs to see them side by side.")
    # One HTML file anyone can open: the first run's charts and table, and with a second run
    # the variants they share side by side.
    reported = [full(rid) for rid in picked if by_id[rid].get("kind", "sweep") == "sweep"]
    if reported:
        widgets.report_download(reported[0], "history-report",
                                compare=reported[1] if len(reported) == 2 else None)
else:
    sweeps = [rid for rid in ids if by_id[rid].get("kind", "sweep") == "sweep"]
    among = st.multiselect("From runs", sweeps, default=sweeps[:1], max_selections=2,
                           format_func=lambda i: widgets.run_label(by_id[i]),
                           key="history_variant_runs")
    loaded = {rid: full(rid) for rid in among}
    options = [(rid, i) for rid in among for i in range(len(loaded[rid]["variants"]))]

    def _label(o):
        rid, i = o
        return f"{loaded[rid]['variants'][i]['name']} · {widgets.run_label(by_id[rid])}"

    picked = st.multiselect("Pick two variants (the first is the reference)", options,
                            max_selections=2, format_func=_label, key="history_variants")
    if len(picked) == 2:
        from benchmarks.report.document import RunReport
        from benchmarks.report.results import VariantResult
        results = [VariantResult.from_dict(loaded[rid]["variants"][i]) for rid, i in picked]
        for result, (rid, _) in zip(results, picked):
            result.name = f"{result.name} ({rid})"
        # The first pick is the reference: every change, and the paired test on the same
        # test examples where both runs scored the same test split, read against it.
        rows = RunReport(variants=results, baseline=results[0].name).rows()
        tables.comparison_table(rows, key="history-variant-cmp")
        st.caption(widgets.paired_note(rows[1]))
    else:
        st.caption("Pick two variants: the table shows every figure and its change.")

st.subheader("Delete a run")
deletable = [rid for rid in ids if admin or by_id[rid].get("owner") == me]
if not deletable:
    st.caption("Only the person who ran a run can delete it; you have none here.")
else:
    victim = st.selectbox("Run to delete (yours)" if not admin else "Run to delete",
                          deletable, format_func=lambda i: widgets.run_label(by_id[i]),
                          key="history_delete_pick")
    sure = st.checkbox("I understand the run and its variants are removed for everyone",
                       key="history_delete_sure")
    if st.button("Delete run", disabled=not sure, key="history_delete"):
        try:
            if by_id[victim]["status"] == "running":
                st.error("This run is still going; cancel its job first.")
            elif state.store().delete_run(victim, by=me, admin=admin):
                st.session_state["history_flash"] = f"Deleted {victim}."
                st.rerun()
            else:
                st.warning(f"{md(victim)} was already gone.")
        except Exception as exc:
            st.error(f"Cannot delete {victim}: {md(state.one_line(exc))}")
