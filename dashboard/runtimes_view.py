"""Where it will run: a run's variant x runtime grid (speed-up against the eager fp32 baseline
at the same batch size and threads, the parity badge, "INT8 in name only", a changed accuracy
verdict), the throughput-latency curves with their 1x crossings, and the best runtime per
variant (named only where it beats the others beyond noise, else "tie: …" with the
interval). Everything is built by the engine's report (``benchmarks/report/runtimes.py``);
this only draws it. Torch-free.

    runtimes_view.draw(run, key)   # a stored run (ResultsStore.run); nothing for a run
                                   # without deployment axes
"""

from __future__ import annotations

import streamlit as st

from benchmarks.report import runtimes
from dashboard import charts


def grid_frame(grid: dict):
    """One grid as a table: a row per variant, a column per runtime ("n/a (why)" where a
    profile could not preview it), and its best runtime."""
    import pandas as pd
    return pd.DataFrame([{"variant": v, **{rt: runtimes.cell_text(grid["cells"][v].get(rt),
                                                                  why=True)
                                           for rt in grid["runtimes"]},
                          "best runtime": grid["best"].get(v, "-")}
                         for v in grid["variants"]])


def best_frame(rows: list[dict]):
    """The best runtime per variant; per instruction-set profile where several were timed
    (the verdict on each kind of CPU)."""
    import pandas as pd
    by = runtimes.best_by_profile(rows)
    several = len(by) > 1
    return pd.DataFrame([{**({"profile": b.get("profile_label") or profile} if several
                             else {}),
                          "variant": v, "best runtime": b["verdict"],
                          "speed-up": f"{b['speedup']:.2f}x", "batch": b["batch_size"],
                          "threads": b["threads"]}
                         for profile, best in by.items() for v, b in best.items()])


def draw(run: dict, key: str) -> None:
    """The run's runtime section (nothing when it had no deployment axes)."""
    from benchmarks.report.document import RunReport
    report = RunReport.from_stored(run)
    if report.kind != "sweep":
        return
    rows = report.rows()
    if not runtimes.has_cells(rows):
        return
    st.subheader("Where it will run")
    st.caption("Each variant under each runtime, batch size and thread count, timed in the "
               "same interleaved rounds; speed-up against the eager fp32 baseline at the same "
               "batch size and threads. " + runtimes.LEGEND)
    st.dataframe(best_frame(rows), hide_index=True, key=f"{key}-rt-best")
    for grid in runtimes.grids(rows):
        name = runtimes.grid_key(grid)
        charts.show(runtimes.grid_chart(grid), key=f"{key}-rt-grid-{name}")
        st.dataframe(grid_frame(grid), hide_index=True, key=f"{key}-rt-table-{name}")
    figures = runtimes.runtime_figures(rows)
    if "runtime-curves" in figures:
        charts.show(figures["runtime-curves"], key=f"{key}-rt-curves")
    for c in runtimes.crossings(rows):
        speeds = ", ".join(f"b{b} {s:.2f}x" for b, s in c["speedups"].items())
        if c["crossing"]:
            lo, hi = c["crossing"]["between"]
            st.markdown(f"**{c['variant']}** under {c['runtime']}: the speed-up crosses 1x "
                        f"between batch {lo} and {hi} (about {c['crossing']['batch']:g}); "
                        f"{speeds}")
