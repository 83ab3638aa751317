"""Where it will run: the variant x runtime grid, the throughput-latency curves and the batch
size at which a speed-up crosses 1x, from the comparison rows of a sweep with deployment axes
(``VariantResult.runtime``). Built once here; the Results page, the HTML report and the CLI
only render it. Torch-free, Streamlit-free.

A grid cell is a variant under a runtime at one batch size and thread count: its speed-up
against the eager fp32 baseline at that batch and threads (timed in the same rounds), its
parity badge against the same variant in eager PyTorch, "INT8 in name only" where its op census
says most convs and matmuls ran float kernels, and a mark where its accuracy verdict against
the baseline (within noise or not) differs from the eager variant's.

A variant's best runtime is named only where it is faster than every other runtime's cell
beyond noise (``verdict``): the cells of one batch size and thread count were timed in the
same interleaved rounds, so each pair is compared by a paired bootstrap over those rounds
(``stats.bootstrap_ratio``, the rounds resampled together, a fixed seed: the same stored
rounds give the same verdict), and the fastest is named when every interval lies above 1x.
Otherwise the grid says "tie: openvino ≈ eager (openvino/eager 1.07x, 95% CI [0.93, 1.22]
over 10 rounds)". One run named OpenVINO at 8.00x against eager's 6.56x and the next, a
minute later, eager at 9.09x against 7.59x: five rounds at an IQR of 15-60% cannot separate
cells within about 30%.
"""

from __future__ import annotations

import math
from collections import defaultdict

import plotly.graph_objects as go

from benchmarks.report.chart_text import escape, markup
from benchmarks.report.stats import CONFIDENCE, bootstrap_ratio
from benchmarks.report.style import CHART_HEIGHT, PALETTE, num, short

EAGER = "eager"
NATIVE = "native"  # the machine as it is (benchmarks.spec.isa)
LEGEND = ("close/off: parity with eager below 99%/95% top-1 agreement (or a significant "
          "accuracy change); n/a: parity not judged (eager predicts one class for nearly every "
          "input: random weights); name-only: INT8 in name only (most convs and matmuls on "
          "float kernels); ≠: accuracy verdict differs from eager's; best: the runtime faster "
          "than every other beyond noise (a paired bootstrap over the shared timing rounds), "
          "else tie with the speed-up's interval; under an instruction-set profile, N% capped: "
          "the share of its multiply-adds whose kernels obeyed the cap (the rest ran at this "
          "CPU's own speed), and n/a alone: no preview, its kernels ignore the cap (its row "
          "says why)")


def has_cells(rows: list[dict]) -> bool:
    return any(r.get("runtime") not in (None, EAGER) or r.get("axis:eval_batch_size")
               is not None or r.get("axis:threads") is not None for r in rows)


def speedup(row: dict) -> float | None:
    ratio = num(row.get("p50_ms_vs_base"))
    return 1.0 / ratio if ratio else None


def _variant(row: dict) -> str:
    return row.get("runtime_variant") or row["variant"]


def _shape(row: dict) -> tuple:
    """A grid's rows: one batch size, thread count and instruction-set profile (each profile
    timed in a process of its own, with its own baseline)."""
    return (row.get("batch_size"), row.get("threads"), row.get("profile") or NATIVE)


def cell(row: dict, eager: dict | None) -> dict:
    """One grid cell from its comparison row (and its variant's eager row at the same shape)."""
    out = {"name": row["variant"], "error": row.get("error"), "speedup": speedup(row),
           "not_applicable": row.get("not_applicable"), "under_cap": num(row.get("under_cap")),
           "p50_ms": num(row.get("p50_ms")), "throughput": num(row.get("throughput")),
           "precision": row.get("runtime_precision"), "badge": row.get("parity_badge"),
           "top1_agree": num(row.get("parity_top1_agree")),
           "verdict": row.get("ops_verdict"), "int_kernels": row.get("int_kernels"),
           "float_kernels": row.get("float_kernels"), "accuracy": num(row.get("accuracy")),
           "rounds": [x for x in (row.get("round_p50_ms") or []) if num(x) is not None]}
    out["name_only"] = row.get("ops_verdict") == "INT8 in name only"
    mine = row.get("within_noise")
    theirs = None
    if eager is not None:
        theirs = True if eager.get("is_baseline") else eager.get("within_noise")
    if row.get("is_baseline"):
        mine = True
    out["verdict_differs"] = (row.get("runtime") not in (None, EAGER) and mine is not None
                              and theirs is not None and mine != theirs)
    return out


def verdict(cells: dict[str, dict], confidence: float = CONFIDENCE) -> dict | None:
    """Which runtime of one variant's cells (at one batch size and threads) is fastest beyond
    noise: {"runtime": its name or None for a tie, "fastest", "tied": [runtimes within noise of
    it], "against": {runtime: {"ratio", "ci", "rounds"}} (the fastest's speed-up over each,
    a paired bootstrap over their shared rounds), "text"}; None where no cell was timed. A
    pair with fewer than two shared rounds has no interval and is a tie: it cannot be told."""
    timed = {rt: c for rt, c in cells.items() if c["speedup"] is not None and not c["error"]}
    if not timed:
        return None
    fastest = max(timed, key=lambda rt: timed[rt]["speedup"])
    against = {}
    for rt, c in timed.items():
        if rt == fastest:
            continue
        boot = bootstrap_ratio([[x] for x in c["rounds"]],
                               [[x] for x in timed[fastest]["rounds"]], confidence)
        if boot is None:  # no rounds stored: the p50s' ratio, with no interval
            boot = {"ratio": timed[fastest]["speedup"] / c["speedup"], "ci": None, "rounds": 0}
        against[rt] = {"ratio": boot["ratio"], "ci": boot["ci"], "rounds": boot["rounds"]}
    tied = [rt for rt, a in against.items() if a["ci"] is None or a["ci"][0] <= 1.0]
    out = {"runtime": None if tied else fastest, "fastest": fastest, "tied": tied,
           "against": against, "confidence": confidence}
    out["text"] = fastest if not tied else "tie: " + " ≈ ".join([fastest, *tied]) + " (" + \
        "; ".join(_ratio_text(fastest, rt, against[rt], confidence) for rt in tied) + ")"
    return out


def _ratio_text(fastest: str, other: str, a: dict, confidence: float) -> str:
    prefix = f"{fastest}/{other} " if other else ""
    if a["ci"] is None:
        return f"{prefix}{a['ratio']:.2f}x, no interval from {a['rounds']} round(s)"
    low, high = a["ci"]
    return (f"{prefix}{a['ratio']:.2f}x, {confidence:.0%} CI [{low:.2f}, {high:.2f}] over "
            f"{a['rounds']} rounds")


def grids(rows: list[dict]) -> list[dict]:
    """One grid per (batch size, threads): {"batch_size", "threads", "variants", "runtimes",
    "cells": {variant: {runtime: cell}}, "best": {variant: the runtime faster than every
    other beyond noise, or "tie: …"}, "verdicts": {variant: ``verdict``}}."""
    by_shape: dict = defaultdict(list)
    for row in rows:
        by_shape[_shape(row)].append(row)
    out = []
    for (batch, threads, profile), members in by_shape.items():
        variants = list(dict.fromkeys(_variant(r) for r in members))
        runtimes = list(dict.fromkeys(r.get("runtime") or EAGER for r in members))
        eager = {_variant(r): r for r in members if (r.get("runtime") or EAGER) == EAGER}
        cells: dict = defaultdict(dict)
        for r in members:
            cells[_variant(r)][r.get("runtime") or EAGER] = cell(r, eager.get(_variant(r)))
        verdicts = {v: verdict(cells[v]) for v in variants}
        verdicts = {v: x for v, x in verdicts.items() if x is not None}
        label = next((r.get("profile_label") for r in members if r.get("profile_label")),
                     None)
        out.append({"batch_size": batch, "threads": threads, "profile": profile,
                    "profile_label": label, "variants": variants,
                    "runtimes": runtimes, "cells": dict(cells), "verdicts": verdicts,
                    "best": {v: x["text"] for v, x in verdicts.items()}})
    return out


def _native(rows: list[dict]) -> list[dict]:
    """The machine's own rows: a capped profile's are in its grid, not in the curves."""
    return [r for r in rows if (r.get("profile") or NATIVE) == NATIVE]


def crossings(rows: list[dict]) -> list[dict]:
    """For each variant, runtime and thread count timed at two or more batch sizes: its
    speed-up at each, and where it crosses 1x (between two measured batch sizes, and the
    batch size interpolated on a log scale)."""
    series: dict = defaultdict(dict)
    for r in _native(rows):
        s = speedup(r)
        if s is not None and not r.get("error") and r.get("batch_size"):
            series[(_variant(r), r.get("runtime") or EAGER, r.get("threads"))][
                r["batch_size"]] = s
    out = []
    for (variant, runtime, threads), points in series.items():
        if len(points) < 2 or (variant, runtime) == ("baseline", EAGER):
            continue
        batches = sorted(points)
        crossing = None
        for lo, hi in zip(batches, batches[1:]):
            a, b = points[lo] - 1.0, points[hi] - 1.0
            if a * b < 0:
                t = a / (a - b)
                at = math.exp(math.log(lo) + t * (math.log(hi) - math.log(lo)))
                crossing = {"between": [lo, hi], "batch": round(at, 1),
                            "direction": "up" if b > 0 else "down"}
                break
        out.append({"variant": variant, "runtime": runtime, "threads": threads,
                    "speedups": {b: points[b] for b in batches}, "crossing": crossing,
                    "below_1x": [b for b in batches if points[b] < 1.0]})
    return out


def best_runtimes(rows: list[dict]) -> dict[str, dict]:
    """{variant: {"runtime", "speedup", "batch_size", "threads", "verdict"}}: its fastest
    cell's batch size and threads, and there the runtime faster than the others beyond noise
    (``runtime`` None and ``verdict`` "tie: …" where none is)."""
    return best_by_profile(rows).get(NATIVE, {})


def best_by_profile(rows: list[dict]) -> dict[str, dict[str, dict]]:
    """{profile: ``best_runtimes`` of its grids}: the verdict per instruction-set profile
    ("on AVX2-only CPUs take X; with AMX take Y"), native the machine as it is."""
    out: dict = defaultdict(dict)
    for grid in grids(rows):
        mine = out[grid["profile"]]
        for variant, v in grid["verdicts"].items():
            s = grid["cells"][variant][v["fastest"]]["speedup"]
            if variant not in mine or s > mine[variant]["speedup"]:
                mine[variant] = {"runtime": v["runtime"], "speedup": s, "verdict": v["text"],
                                 "batch_size": grid["batch_size"], "threads": grid["threads"],
                                 "profile": grid["profile"],
                                 "profile_label": grid["profile_label"]}
    return dict(out)


def verdict_on_each_profile(rows: list[dict], name: str) -> list[str]:
    """Where more than one instruction-set profile was timed: the best runtime of the
    variant whose row is ``name`` (an answer's) under each profile, as "verdict (speed-up)
    under label"; empty where one profile was timed or the variant has no verdict."""
    row = next((r for r in rows if r.get("variant") == name), None)
    by = best_by_profile(rows)
    if row is None or len(by) < 2:
        return []
    variant = _variant(row)
    return [f"{b['verdict']} ({b['speedup']:.2f}x) under {b.get('profile_label') or profile}"
            for profile, best in by.items() if (b := best.get(variant))]


def profile_verdicts(rows: list[dict]) -> list[str]:
    """"the verdict per instruction-set profile" lines, where more than one was timed: each
    variant's best runtime under each (against that profile's own baseline)."""
    by = best_by_profile(rows)
    if len(by) < 2:
        return []
    lines = ["the verdict per instruction-set profile (each against its own baseline):"]
    for profile, best in by.items():
        said = next((b["profile_label"] for b in best.values() if b.get("profile_label")),
                    profile)
        for variant, b in best.items():
            lines.append(f"  {said}: {variant}: {b['verdict']} ({b['speedup']:.2f}x)")
    return lines


# -- as text (the CLI) and as figures (the page, the report) ------------------------------------

def cell_text(c: dict | None, why: bool = False) -> str:
    """A cell as the grids write it; ``why``: an n/a cell with its reason, "n/a (why)"."""
    if c is None:
        return "-"
    if c["error"]:
        return "failed"
    if c.get("not_applicable"):
        return f"n/a ({c['not_applicable']})" if why else "n/a"
    text = "-" if c["speedup"] is None else f"{c['speedup']:.2f}x"
    if c.get("under_cap") is not None and c["under_cap"] < 1:
        text += f" {c['under_cap']:.0%} capped"
    if c["badge"] and c["badge"] != "ok":
        text += f" {c['badge']}"
    if c["name_only"]:
        text += " name-only"
    if c["verdict_differs"]:
        text += " ≠"
    return text


def grid_text(rows: list[dict]) -> str:
    """The grids as aligned text, one per batch size and thread count."""
    blocks = []
    for g in grids(rows):
        heads = ["variant", *g["runtimes"], "best"]
        body = [[short(v, 28), *(cell_text(g["cells"][v].get(rt)) for rt in g["runtimes"]),
                 g["best"].get(v, "-")] for v in g["variants"]]
        widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(heads)]
        where = "" if g["profile"] == NATIVE else f", {g['profile_label'] or g['profile']}"
        lines = [f"speed-up vs eager fp32 baseline, batch {g['batch_size']}, "
                 f"{g['threads']} thread(s){where}:",
                 "  ".join(h.ljust(w) for h, w in zip(heads, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in body]
        blocks.append("\n".join(lines))
    verdicts = profile_verdicts(rows)
    if verdicts:
        blocks.append("\n".join(verdicts))
    lines = [f"{c['variant']} under {c['runtime']}: speed-up crosses 1x between batch "
             f"{c['crossing']['between'][0]} and {c['crossing']['between'][1]} (about "
             f"{c['crossing']['batch']:g})" for c in crossings(rows) if c["crossing"]]
    if lines:
        blocks.append("\n".join(lines))
    blocks.append(LEGEND)
    return "\n\n".join(blocks)


def grid_chart(grid: dict) -> go.Figure:
    """A grid as a heatmap: speed-up (log colour scale around 1x), each cell's text its
    speed-up, parity badge and flags."""
    variants, runtimes = grid["variants"], grid["runtimes"]
    z, text, hover = [], [], []
    for v in variants:
        row_z, row_t, row_h = [], [], []
        for rt in runtimes:
            c = grid["cells"][v].get(rt)
            s = c["speedup"] if c and not c["error"] else None
            row_z.append(math.log2(s) if s else None)
            row_t.append(cell_text(c))
            row_h.append("not measured" if c is None else c["error"] or
                         c.get("not_applicable") or
                         markup("{}<br>{}<br>ran in {}; census: {} ({} int / {} float "
                                "convs+matmuls)", c["name"], cell_text(c), c["precision"],
                                c["verdict"], c["int_kernels"], c["float_kernels"]))
        z.append(row_z)
        text.append(row_t)
        hover.append(row_h)
    fig = go.Figure(go.Heatmap(
        z=z, x=runtimes, y=[short(v) for v in variants], text=text, customdata=hover,
        texttemplate="%{text}", hovertemplate="%{customdata}<extra></extra>",
        colorscale="RdBu", zmid=0, zmin=-2, zmax=2,
        colorbar=dict(title="speed-up", tickvals=[-2, -1, 0, 1, 2],
                      ticktext=["0.25x", "0.5x", "1x", "2x", "4x"])))
    where = "" if grid.get("profile", NATIVE) == NATIVE else \
        f", {grid.get('profile_label') or grid['profile']}"
    fig.update_layout(title=f"Speed-up vs eager fp32 baseline, batch {grid['batch_size']}, "
                            f"{grid['threads']} thread(s){where}",
                      height=max(CHART_HEIGHT, 90 + 36 * len(variants)),
                      margin=dict(l=10, r=10, t=40, b=10))
    fig.update_yaxes(autorange="reversed")
    return fig


def curves_chart(rows: list[dict]) -> go.Figure:
    """Throughput against latency per variant and runtime, one point per batch size (its
    label), a marker where its speed-up crosses 1x."""
    fig = go.Figure()
    series: dict = defaultdict(list)
    for r in _native(rows):
        if not r.get("error") and num(r.get("p50_ms")) and num(r.get("throughput")):
            series[(_variant(r), r.get("runtime") or EAGER, r.get("threads"))].append(r)
    for i, ((variant, runtime, threads), members) in enumerate(series.items()):
        members.sort(key=lambda r: r.get("batch_size") or 0)  # a stored row may lack one
        fig.add_scatter(x=[r["p50_ms"] for r in members], y=[r["throughput"] for r in members],
                        mode="lines+markers+text", text=[f"b{r.get('batch_size') or '?'}" for r in members],
                        textposition="top center", name=f"{short(variant)} · {runtime}"
                        + (f" · t{threads}" if threads else ""),
                        line=dict(color=PALETTE[i % len(PALETTE)]),
                        hovertemplate="%{text}: %{x:.3f} ms, %{y:,.0f} samples/s"
                                      "<extra>" + escape(f"{variant} · {runtime}") + "</extra>")
    marks = [c for c in crossings(rows) if c["crossing"]]
    for c in marks:
        members = series.get((c["variant"], c["runtime"], c["threads"]), [])
        lo, hi = c["crossing"]["between"]
        ends = [r for r in members if r["batch_size"] in (lo, hi)]
        if len(ends) == 2:
            fig.add_scatter(x=[(ends[0]["p50_ms"] * ends[1]["p50_ms"]) ** 0.5],
                            y=[(ends[0]["throughput"] * ends[1]["throughput"]) ** 0.5],
                            mode="markers+text", marker=dict(symbol="x", size=12,
                                                             color="#111827"),
                            text=[f"1x near b{c['crossing']['batch']:g}"],
                            textposition="bottom right", showlegend=False,
                            hovertemplate=f"{escape(c['variant'])} · {escape(c['runtime'])}: "
                                          f"speed-up crosses 1x between b{lo} and b{hi}"
                                          f"<extra></extra>")
    fig.update_layout(title="Throughput vs latency, one point per batch size (x: speed-up "
                            "crosses 1x)", height=CHART_HEIGHT + 120,
                      margin=dict(l=10, r=10, t=40, b=10), showlegend=True,
                      xaxis_title="p50 latency (ms per batch)", yaxis_title="samples/s")
    fig.update_xaxes(type="log")
    fig.update_yaxes(type="log")
    return fig


def grid_key(grid: dict) -> str:
    """A grid's name among a run's: b32-t1, b32-t1-sse41 under a capped profile."""
    name = f"b{grid['batch_size']}-t{grid['threads']}"
    return name if grid.get("profile", NATIVE) == NATIVE else f"{name}-{grid['profile']}"


def runtime_figures(rows: list[dict]) -> dict[str, go.Figure]:
    """Every runtime figure of a run, by name: a grid per batch size and thread count, and
    the curves where some variant was timed at two or more batch sizes."""
    if not has_cells(rows):
        return {}
    figs = {f"runtime-grid:{grid_key(g)}": grid_chart(g) for g in grids(rows)}
    if any(len(c["speedups"]) > 1 for c in crossings(rows)) or \
            len({r.get("batch_size") for r in _native(rows)}) > 1:
        figs["runtime-curves"] = curves_chart(rows)
    return figs
