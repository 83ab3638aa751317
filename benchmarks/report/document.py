"""One run report: the typed object behind every output of a run.

A ``RunReport`` holds a run's spec, environment, variants, its baseline (named, never
guessed by clearing a variant's techniques) and status. It builds the JSON document (schema 1,
unchanged for its readers, extended with the comparison against the baseline), the comparison
rows and the text tables. The CLI, the queue's worker, the distributed benchmark and the
dashboard's downloads all go through it. Torch-free.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from benchmarks.report.comparisons import comparison_rows, find_baseline
from benchmarks.report.records import CONTENTION_FRACTION
from benchmarks.report.results import VariantResult
from benchmarks.report import stats
from benchmarks.report.seeds import seeds_note, seeds_shown, shown_rows
from benchmarks.spec.cpu_env import variables_text
from benchmarks.spec.isa import NATIVE

SCHEMA = 1
# The roofline's figures each comparison row carries (``VariantResult.roofline``).
# At most this many flipped examples of each kind are listed per variant (all are counted).
FLIPS_LISTED = 100
ROOFLINE_FIELDS = ("precision", "achieved_flops_per_s", "arithmetic_intensity",
                   "percent_of_peak", "peak_flops_per_s", "roof_flops_per_s", "bound",
                   "above_peak", "theoretical_peak_flops_per_s", "above_theoretical",
                   "peak_note")


@dataclass
class RunReport:
    kind: str = "sweep"                       # "sweep" or "distributed"
    environment: dict = field(default_factory=dict)
    spec: dict = field(default_factory=dict)
    variants: list = field(default_factory=list)  # VariantResult (sweep) or dict (distributed)
    baseline: str | None = None               # the variant every other is compared with
    status: str | None = None
    run_id: str | None = None
    created_at: str | None = None
    finished_at: str | None = None
    error: str | None = None
    model: str | None = None
    dataset: str | None = None
    device: str | None = None
    # A recommendation's search, split and certificate (``benchmarks.recommend``), or None.
    recommendation: dict | None = None

    @classmethod
    def from_stored(cls, run: dict) -> "RunReport":
        """A run as the store returns it (``ResultsStore.run``)."""
        kind = run.get("kind", "sweep")
        variants = [VariantResult.from_dict(v) for v in run.get("variants") or []] \
            if kind == "sweep" else list(run.get("variants") or [])
        report = cls(kind=kind, environment=run.get("environment") or {},
                     spec=run.get("spec") or {}, variants=variants, status=run.get("status"),
                     run_id=run.get("run_id"), created_at=run.get("created_at"),
                     finished_at=run.get("finished_at"), error=run.get("error"),
                     model=run.get("model"), dataset=run.get("dataset"),
                     device=run.get("device"), recommendation=run.get("recommendation"))
        if kind == "sweep":
            base = find_baseline(variants)
            report.baseline = base.name if base is not None else None
        return report

    # -- the comparison --------------------------------------------------------------------

    def rows(self) -> list[dict]:
        """The comparison rows (sweeps), each with its place on the roofline; or the runs
        themselves (distributed)."""
        if self.kind != "sweep":
            return [dict(v) for v in self.variants]
        rows = comparison_rows(self.variants, self.baseline)
        for variant, row in zip(self.variants, rows):
            point = variant.roofline(self.environment)
            row.update({k: point[k] for k in ROOFLINE_FIELDS})
            if point.get("roofline_warning"):  # an unregistered precision: no roof, said so
                row["roofline_warning"] = point["roofline_warning"]
        return rows

    def shown_rows(self) -> list[dict]:
        """The rows as the tables and charts show them: with several seeds, accuracy over
        seeds (``benchmarks.report.seeds``); seed 0's figures stay in ``rows()``."""
        rows = self.rows()
        return shown_rows(rows) if self.kind == "sweep" else rows

    @property
    def peaks(self) -> dict:
        """The measured peaks of the run's devices, {"cpu": {...}, "cuda:0": {...}}; empty for
        runs stored before peaks were measured."""
        return self.environment.get("peaks") or {}

    def measurement_line(self) -> str:
        """How the run's inputs and timings were taken, in one line."""
        env, spec = self.environment, self.spec
        norm = (env.get("data") or {}).get("normalization") or {}
        parts = [f"inputs normalised: {norm.get('mode', '?')}"]
        if norm.get("mean"):  # four significant figures: the stored floats are float32's
            parts[-1] += f" (mean {_figures(norm['mean'])}, std {_figures(norm['std'])})"
        if (spec.get("seeds") or 1) > 1:
            parts.append(f"{spec['seeds']} seeds per trained variant")
        if spec.get("timing", "interleaved") == "interleaved":
            parts.append(f"timed interleaved, {spec.get('timing_rounds', 5)} rounds")
        else:
            parts.append("timed sequentially")
        if (env.get("precision") or {}).get("fp32"):
            parts.append(f"fp32: {env['precision']['fp32']}")
        variables = variables_text(env.get("variables"))
        if variables:  # what decided the CPU's kernels besides the machine
            parts.append(variables)
        return " · ".join(parts)

    @property
    def warnings(self) -> list[str]:
        """Every variant's warnings, once each, in order (e.g. a near-chance baseline)."""
        seen: list[str] = []
        for v in self.variants:
            for w in (v.warnings if isinstance(v, VariantResult) else v.get("warnings") or []):
                if w not in seen:
                    seen.append(w)
        return seen

    # -- outputs ---------------------------------------------------------------------------

    def document(self) -> dict:
        """The JSON contract: {"schema": 1, "environment", "variants": [...]} for a sweep
        (each variant with its comparison against the baseline), {"schema": 1,
        "environment", "runs": [...]} for the distributed benchmark."""
        if self.kind != "sweep":
            return {"schema": SCHEMA, "environment": self.environment,
                    "runs": [dict(v) for v in self.variants]}
        rows = {r["variant"]: r for r in self.rows()}
        variants = []
        for v in self.variants:
            d = v.to_dict()
            row = rows.get(v.name, {})
            if v.name != self.baseline and self.baseline is not None:
                d["p_value_vs_baseline"] = row.get("p_value_vs_base")
                d["within_noise"] = row.get("within_noise")
                d["vs_baseline"] = {k[:-len("_vs_base")]: row[k] for k in row
                                    if k.endswith("_vs_base")
                                    and not k.startswith(("p_value", "accuracy_seed"))}
                d["vs_baseline"]["reference"] = row.get("baseline_ref")
                # The accuracy change's interval (points), from the test p_value_vs_baseline
                # is of (vs_baseline["test"] names it).
                d["vs_baseline"]["accuracy_ci"] = row.get("accuracy_vs_base_ci")
                if row.get("p_value_seeds_vs_base") is not None:
                    d["seeds_vs_baseline"] = {
                        "test": "paired t-test over seeds", "n": row["accuracy_seed_n"],
                        "mean_difference_pts": row["accuracy_seed_vs_base"],
                        "ci_pts": row["accuracy_seed_vs_base_ci"],
                        "p_value": row["p_value_seeds_vs_base"],
                        "within_noise": row["within_noise_seeds"]}
            point = {k: row.get(k) for k in ROOFLINE_FIELDS}
            d["achieved_flops_per_s"] = point.pop("achieved_flops_per_s")
            d["percent_of_peak"] = point.pop("percent_of_peak")
            d["roofline"] = {**point, "traffic_bytes": v.cost.traffic_bytes}
            flips = self._flips(v)
            if flips is not None:
                d["flips_vs_baseline"] = flips
            if row.get("control"):
                d["vs_control"] = {"control": row["control"],
                                   "gain_pts": row.get("gain_vs_control_pts"),
                                   "gain_ci_pts": row.get("gain_vs_control_ci"),
                                   "p_value": row.get("p_value_vs_control"),
                                   "test": row.get("test_vs_control")}
            variants.append(d)
        out = {"schema": SCHEMA, "environment": self.environment, "baseline": self.baseline,
               "warnings": self.warnings, "variants": variants}
        if self.recommendation is not None:  # recommend: the certificate and its search
            out["recommendation"] = self.recommendation
        return out

    def _flips(self, variant: VariantResult) -> dict | None:
        """The test examples the variant turned wrong (and right) against the baseline, from
        their correctness bits; None for the baseline or where they do not pair."""
        base = next((b for b in self.variants if b.name == self.baseline), None)
        if base is None or variant is base or not (base.scores.correct_bits and
                                                    variant.scores.correct_bits) \
                or base.scores.n_test != variant.scores.n_test:
            return None
        from benchmarks.report.stats import flipped
        return flipped(base.scores.correct_bits, variant.scores.correct_bits,
                       variant.scores.n_test, FLIPS_LISTED)

    def summary(self) -> dict:
        """The run as ``history --json`` lists it: its summary fields and the document's
        variants."""
        doc = self.document()
        return {"run_id": self.run_id, "created_at": self.created_at,
                "finished_at": self.finished_at, "kind": self.kind, "model": self.model,
                "dataset": self.dataset, "device": self.device, "status": self.status,
                "error": self.error, "spec": self.spec, "environment": self.environment,
                "warnings": self.warnings,
                "variants": doc.get("variants", doc.get("runs", [])),
                **({"recommendation": self.recommendation} if self.recommendation else {})}

    def table(self) -> str:
        rows = self.shown_rows()
        if self.kind != "sweep":
            return format_table(rows, RUN_COLUMNS)
        text = format_table(rows, sweep_columns(rows), marks=sweep_marks)
        from benchmarks.report.runtimes import grid_text, has_cells
        grid = [f"\n{grid_text(rows)}"] if has_cells(rows) else []
        return "\n".join([text, *table_notes(rows), *grid, *peak_notes(self.environment),
                          *(f"warning: {w}" for w in self.warnings)])

    def csv_text(self) -> str:
        rows = self.rows()
        out = io.StringIO()
        columns = list(dict.fromkeys(k for r in rows for k in r)) or ["variant"]
        writer = csv.DictWriter(out, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
        return out.getvalue()


def compare_runs(a: RunReport, b: RunReport) -> list[dict]:
    """The variants two sweeps share by name, set side by side: the change in accuracy from
    ``a`` to ``b`` with the paired test where both scored the same test examples, and the
    latency ratio where both ran on the same device type."""
    theirs = {v.name: v for v in b.variants}
    rows = []
    for mine in a.variants:
        other = theirs.get(mine.name)
        if other is None or not (mine.ok and other.ok):
            continue
        a_lat, b_lat = mine.timing.latency, other.timing.latency
        a_scores, b_scores = mine.scores, other.scores
        row = {"variant": mine.name, "accuracy_a": a_scores.accuracy,
               "accuracy_b": b_scores.accuracy,
               "accuracy_change_pts": None, "accuracy_change_ci": None, "p_value": None,
               "within_noise": None, "test": None,
               "p50_ms_a": a_lat.p50 if a_lat else None,
               "p50_ms_b": b_lat.p50 if b_lat else None, "p50_ratio": None}
        if a_scores.accuracy is not None and b_scores.accuracy is not None:
            row["accuracy_change_pts"] = 100 * (b_scores.accuracy - a_scores.accuracy)
        if a_scores.correct_bits and b_scores.correct_bits and \
                a_scores.n_test == b_scores.n_test:
            # The change's interval and p-value from one test (they never disagree).
            test = stats.paired_bits(b_scores.correct_bits, a_scores.correct_bits,
                                     a_scores.n_test)
            row.update(accuracy_change_ci=test["ci_pts"], p_value=test["p_value"],
                       test=test["test"], within_noise=test["p_value"] >= stats.ALPHA)
        if row["p50_ms_a"] and row["p50_ms_b"] and \
                mine.device.split(":")[0] == other.device.split(":")[0]:
            row["p50_ratio"] = row["p50_ms_b"] / row["p50_ms_a"]
        rows.append(row)
    return rows


def table_notes(rows: list[dict]) -> list[str]:
    """What the marks of the comparison table mean, for the marks these rows carry."""
    notes = []
    seeds = seeds_note(rows)
    if seeds:
        notes.append(seeds)
    if any(r.get("noisy") for r in rows):
        notes.append("~ noisy: latency spread (IQR) above 10% of the median")
    if any(r.get("within_noise") for r in rows) and not seeds:
        notes.append("= within noise: the accuracy change is not significant (p >= 0.05, "
                     "paired on the test examples; Δ 95% CI is from the same test: exact "
                     f"unconditional with fewer than {stats.EXACT_BELOW} discordant pairs, "
                     "Tango's score test otherwise)")
    if any(r.get("contention") for r in rows):
        notes.append(f"! on sust/s, contention: the rate sustained over the timed windows "
                     f"(samples timed / their wall time) is more than "
                     f"{CONTENTION_FRACTION:.0%} off the median call's samples/s: other "
                     f"work on the machine took its share")
    if any(r.get("above_peak") for r in rows):
        notes.append("! on % peak: above the measured roof even after the peak was measured "
                     "again (the environment's peaks, remeasured)")
    if any(r.get("baseline_ref", "baseline") not in (None, "baseline") for r in rows):
        notes.append("* ratio against the baseline timed on the same device, in the "
                     "same rounds")
    if any(r.get("launch_bound") for r in rows):
        notes.append("^ launch-bound: the device waited on the host; the time is launch "
                     "overhead, not kernels")
    if any(r.get("percent_of_peak") is not None for r in rows):
        notes.append("% peak: achieved FLOP/s over the device's measured peak for the "
                     "precision the variant ran in (the best of the kernels it runs)"
                     + ("; a capped profile's rows, over the peak measured under its cap"
                        if any(r.get("profile") not in (None, NATIVE) for r in rows)
                        else ""))
    unheld: dict[str, list[str]] = {}
    for r in rows:
        if r.get("peak_note"):
            unheld.setdefault(r["peak_note"], []).append(r["variant"])
    for why, variants in unheld.items():
        notes.append(f"- on % peak ({', '.join(variants)}): {why}")
    return notes


def _gflops(value) -> str:
    return "-" if value is None else f"{value / 1e9:,.1f}"


def peak_notes(environment: dict) -> list[str]:
    """Each device's roofs in one line (measured, theoretical beside), and each peak
    measured again during this run, with why."""
    notes = []
    since = environment.get("created_at") or ""
    for device, peaks in (environment.get("peaks") or {}).items():
        theory = peaks.get("theoretical") or {}
        top, native = theory.get("gemm_flops_per_s") or {}, theory.get("native") or {}
        parts = []
        for precision, value in (peaks.get("gemm_flops_per_s") or {}).items():
            part = f"{precision} {_gflops(value)}"
            if precision in top:
                part += f" (theoretical {_gflops(top[precision])}"
                part += ")" if native.get(precision, True) else ", no native instructions)"
            parts.append(part)
        if parts:
            notes.append(f"roofs {device}: " + ", ".join(parts) + " GFLOP/s")
        clock = peaks.get("clock") or {}
        if clock.get("sustained_ghz") and theory.get("clock_ghz"):
            notes.append(f"roofs {device}: theoretical at {theory['clock_ghz']:.2f} GHz "
                         f"(sustained {clock['sustained_ghz']:.2f} measured, "
                         f"{clock.get('nominal_ghz') or 0:.2f} stated)")
        for why in (peaks.get("kernel_limited") or {}).values():
            notes.append(f"roofs {device}: believed low, {why}")
        for entry in peaks.get("remeasured") or []:
            if entry.get("at", "") >= since:
                notes.append(f"roofs {device}: {', '.join(map(str, entry['precisions']))} "
                             f"measured again at {entry['at']} ({entry['reason']})")
    return notes


# -- text tables ---------------------------------------------------------------------------

def _pct(value) -> str:
    return f"{value * 100:.2f}"


def _ci(row) -> str:
    low, high = row.get("accuracy_ci_low"), row.get("accuracy_ci_high")
    return "-" if low is None else f"{low * 100:.1f}-{high * 100:.1f}"


def _pts(value) -> str:
    return f"{value:+.2f}"


def _delta_ci(row) -> str:
    ci = row.get("accuracy_vs_base_ci")
    return "-" if not ci else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


def sweep_marks(row: dict, cells: dict) -> None:
    if row.get("noisy") and cells.get("p50_ms") not in (None, "-"):
        cells["p50_ms"] += "~"  # flagged: IQR above 10% of the median
    if row.get("launch_bound") and cells.get("p50_ms") not in (None, "-"):
        cells["p50_ms"] += "^"
    if row.get("contention") and cells.get("throughput_sustained") not in (None, "-"):
        cells["throughput_sustained"] += "!"
    if row.get("above_peak") and cells.get("percent_of_peak") not in (None, "-"):
        cells["percent_of_peak"] += "!"
    if row.get("within_noise") and cells.get("accuracy_vs_base") not in (None, "-"):
        cells["accuracy_vs_base"] += "="
    if row.get("baseline_ref") not in (None, "baseline") and \
            cells.get("p50_ms_vs_base") not in (None, "-"):
        cells["p50_ms_vs_base"] += "*"


# (key, heading, format): a format string, or a function of the value; "row:" functions get
# the whole row.
SWEEP_COLUMNS = [
    ("variant", "variant", "{}"), ("device", "device", "{}"),
    ("accuracy", "acc %", _pct), ("accuracy_ci", "95% CI", "row:ci"),
    ("accuracy_vs_base", "Δ pts", _pts), ("accuracy_vs_base_ci", "Δ 95% CI", "row:dci"),
    ("p50_ms", "p50 ms", "{:.3f}"),
    ("p90_ms", "p90 ms", "{:.3f}"), ("throughput", "samples/s", "{:,.0f}"),
    ("throughput_sustained", "sust/s", "{:,.0f}"),
    ("peak_memory_mb", "peak MB", "{:.2f}"), ("size_mb", "size MB", "{:.3f}"),
    ("size_gzip_mb", "gzip MB", "{:.3f}"), ("nonzero_params", "nonzero", "{:,}"),
    ("p50_ms_vs_base", "p50 vs base", "{:.2f}x"), ("size_mb_vs_base", "size vs base", "{:.2f}x"),
    ("percent_of_peak", "% peak", "{:.1f}"),
]


def sweep_columns(rows: list[dict]) -> list[tuple]:
    """The sweep table's columns; over seeds, the accuracy headings say so."""
    n = seeds_shown(rows)
    if n is None:
        return SWEEP_COLUMNS
    heads = {"accuracy": f"acc % (mean of {n})", "accuracy_ci": "95% CI (t)"}
    return [(key, heads.get(key, head), fmt) for key, head, fmt in SWEEP_COLUMNS]


RUN_COLUMNS = [
    ("name", "run", "{}"), ("throughput", "samples/s", "{:,.0f}"),
    ("scaling_efficiency", "efficiency", "{:.2f}"), ("bytes_per_step", "bytes/step", "{:,}"),
    ("comm_ms_per_step", "comm ms", "{:.2f}"), ("step_ms", "step ms", "{:.2f}"),
    ("loss", "loss", "{:.4f}"), ("accuracy", "acc %", _pct), ("wall_s", "wall s", "{:.1f}"),
]
_ROW_FORMATS = {"row:ci": _ci, "row:dci": _delta_ci}


def format_cells(row: dict, columns: list[tuple], marks=None) -> list[str]:
    """One row's cells as text: "-" for a missing value, then the marks (flags) added. The
    text table and the HTML report share it."""
    cells = {}
    for key, _, fmt in columns:
        if isinstance(fmt, str) and fmt.startswith("row:"):
            cells[key] = _ROW_FORMATS[fmt](row)
            continue
        value = row.get(key)
        if value is None:
            cells[key] = "-"
        else:
            cells[key] = fmt(value) if callable(fmt) else fmt.format(value)
    if marks is not None:
        marks(row, cells)
    return [cells[k] for k, _, _ in columns]


def format_table(rows: list[dict], columns: list[tuple], marks=None) -> str:
    """The one text-table formatter: aligned columns, "-" for a missing value, then one line
    per failed row naming its error and one per n/a row, "variant: n/a (why)"."""
    body = [format_cells(row, columns, marks) for row in rows]
    heads = [h for _, h, _ in columns]
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(heads)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in body]
    for row in rows:
        if row.get("error"):
            lines.append(f"! {row.get('variant') or row.get('name')}: {row['error']}")
        elif row.get("not_applicable"):
            lines.append(f"{row.get('variant') or row.get('name')}: n/a "
                         f"({row['not_applicable']})")
    return "\n".join(lines)


def _figures(values) -> str:
    """A per-channel statistic as shown: [0.3049] (0.304882 stored), [0.485, 0.456, 0.406]."""
    from benchmarks.report.formats import plain
    if not isinstance(values, (list, tuple)):
        return plain(values)
    return "[" + ", ".join(plain(v) for v in values) + "]"
