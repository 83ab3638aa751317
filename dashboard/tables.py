"""A run's tables: the comparison with the baseline (its columns in reading order, headers in
words, numbers at a sensible precision, every column's meaning on hover, "—" where a figure
does not apply), the Pareto frontier, and two runs' shared variants side by side."""

from __future__ import annotations

import streamlit as st

from benchmarks.report.formats import display_rows, header, percent
from dashboard.markup import md

NOT_APPLICABLE = "—"  # a figure that does not apply (seeds on a one-seed run, a failed row)



def memory_reason(row: dict) -> str:
    """Why a row has no peak memory, in words: the recorded ``memory_method`` ("not measured:
    the runtime's own allocator" for ONNX Runtime and the like, which allocate outside
    PyTorch's counters), else the row's failure, else plainly "not measured"."""
    method = str(row.get("memory_method") or "")
    if method.startswith("not measured"):
        return method
    return "not measured: the variant failed" if row.get("error") else "not measured"


def memory_text(row: dict) -> str:
    """A row's peak memory as a page shows it: "12.34 MB", or "—" with the reason, never a
    bare "— MB"."""
    value = row.get("peak_memory_mb")
    if value is not None:
        return f"{value:.2f} MB"
    return f"{NOT_APPLICABLE} ({memory_reason(row)})"


# Columns of the comparison table, in reading order: each figure beside its change.
TABLE_COLUMNS = [
    "variant", "techniques", "device", "accuracy", "accuracy_shows", "accuracy_ci_low",
    "accuracy_ci_high", "accuracy_vs_base", "accuracy_vs_base_ci", "p_value_vs_base",
    "within_noise", "test_vs_base",
    "accuracy_seed_mean", "accuracy_seed_std", "accuracy_seed0", "gain_vs_control_pts",
    "p50_ms", "p50_ms_vs_base", "baseline_ref", "p90_ms", "p99_ms", "noisy", "launch_bound",
    "timing", "throughput", "throughput_sustained", "contention", "throughput_vs_base",
    "precision", "percent_of_peak", "above_peak",
    "peak_memory_mb", "peak_memory_mb_vs_base", "memory_method", "size_mb", "size_mb_vs_base",
    "size_gzip_mb", "size_gzip_mb_vs_base", "params", "nonzero_params",
    "nonzero_params_vs_base", "flops", "flops_effective", "flops_vs_base",
    "achieved_flops_per_s", "arithmetic_intensity", "bound", "error", "not_applicable",
    "under_cap"]


def _number(label: str, fmt: str, help: str):
    return st.column_config.NumberColumn(label, format=fmt, help=help)


def _ratio(label: str, what: str):
    return _number(label, "%.2fx", f"{what} of this variant over the baseline's (1.00x: the "
                                   f"same; below 1: smaller)")


def _text(label: str, help: str):
    return st.column_config.TextColumn(label, help=help)


def _check(label: str, help: str):
    return st.column_config.CheckboxColumn(label, help=help)


# Headers in words, numbers at a sensible precision (34,441 samples/s, not 34440.7098), and
# what each column means on hover.
TABLE_CONFIG = {
    "variant": st.column_config.TextColumn("Variant", pinned=True,
                                           help="The variant's name: its techniques and the "
                                                "settings that vary"),
    "techniques": _text("Techniques", "The techniques applied, in chain order"),
    "device": _text("Ran on", "Where the variant was measured"),
    "accuracy": _number("Accuracy", "percent", "Top-1 accuracy on the test split"),
    "accuracy_ci_low": _number("95% CI from", "percent", "Wilson 95% interval, lower end"),
    "accuracy_ci_high": _number("95% CI to", "percent", "Wilson 95% interval, upper end"),
    "accuracy_vs_base": _number("Δ accuracy (points)", "%+.2f",
                                "Accuracy change against the baseline, in percentage points"),
    "p_value_vs_base": _number("p (paired, vs baseline)", "%.3f",
                               "Paired test on the same test examples (exact unconditional "
                               "with fewer than 50 discordant pairs, Tango's score test "
                               "otherwise; the change's interval is from the same test): "
                               "below 0.05, the change is a finding"),
    "within_noise": _check("Within noise", "p >= 0.05: the accuracy change is not a finding "
                                           "(which is not the same as equal)"),
    "accuracy_vs_base_ci": _text("Δ 95% CI (points)", "The accuracy change's 95% interval, "
                                 "from the same paired test as p: it excludes zero exactly "
                                 "when p < 0.05"),
    "test_vs_base": _text("Paired test", "Which test gave the change's interval and p: exact "
                          "unconditional with fewer than 50 discordant pairs, Tango's score "
                          "test otherwise, the paired t-test over seeds with --seeds"),
    "accuracy_seed_mean": _number("Accuracy, mean over seeds", "percent",
                                  "With several seeds: the mean accuracy of the rebuilds"),
    "accuracy_seed_std": _number("Std over seeds", "percent",
                                 "With several seeds: their standard deviation"),
    "gain_vs_control_pts": _number("Gain over scratch twin (points)", "%+.2f",
                                   "A distilled student against the same student trained "
                                   "without its teacher"),
    "p50_ms": _number("Latency p50 (ms)", "%.3f", "Median time per batch"),
    "p50_ms_vs_base": _ratio("Latency vs baseline", "p50 latency"),
    "baseline_ref": _text("Latency compared with", "The baseline timed on the same device, "
                                                   "in the same interleaved rounds"),
    "p90_ms": _number("p90 (ms)", "%.3f", "90th percentile time per batch"),
    "p99_ms": _number("p99 (ms)", "%.3f", "99th percentile time per batch"),
    "noisy": _check("Noisy latency", "Interquartile range above 10% of the median: other "
                                     "work disturbed the timing"),
    "launch_bound": _check("Launch-bound", "CUDA: the GPU waits on the host issuing calls"),
    "timing": _text("Timed", "Interleaved rounds, sequential, or not timed"),
    "throughput": _number("Samples/s (median call)", "localized",
                          "Examples per second at the p50"),
    "throughput_sustained": _number("Samples/s sustained", "localized",
                                    "Samples timed over the wall time of the timed windows"),
    "contention": _check("Contention", "The sustained rate is more than 20% off the median "
                                       "call's: other work shared the machine"),
    "accuracy_shows": _text("Accuracy shown", "Over seeds: the mean; else the one build"),
    "accuracy_seed0": _number("Accuracy, seed 0", "percent", "The first seed's build"),
    "above_peak": _check("Above its roof", "Above the measured peak even after it was "
                                           "measured again"),
    "throughput_vs_base": _ratio("Samples/s vs baseline", "Throughput"),
    "precision": _text("Ran in", "The precision the variant's kernels ran in"),
    "percent_of_peak": _number("% of peak", "%.1f", "Achieved FLOP/s over the device's "
                                                    "measured GEMM peak for this precision"),
    "peak_memory_mb": _number("Peak memory (MB)", "%.2f", "Peak memory of one forward pass; "
                              "— where it was not measured ('Memory measured by' says why)"),
    "peak_memory_mb_vs_base": _ratio("Memory vs baseline", "Peak memory"),
    "memory_method": _text("Memory measured by", "How the peak was measured"),
    "size_mb": _number("Size (MB)", "%.3f", "Serialized size of the weights"),
    "size_mb_vs_base": _ratio("Size vs baseline", "Serialized size"),
    "size_gzip_mb": _number("Gzipped (MB)", "%.3f", "The serialized weights, gzipped: what "
                                                    "zeros from pruning save on disk"),
    "size_gzip_mb_vs_base": _ratio("Gzipped vs baseline", "Gzipped size"),
    "params": _number("Parameters", "localized", "Every parameter, zeros included"),
    "nonzero_params": _number("Non-zero parameters", "localized", "Parameters that are not "
                                                                  "zero"),
    "nonzero_params_vs_base": _ratio("Non-zero vs baseline", "Non-zero parameters"),
    "flops": _number("FLOPs per sample (dense)", "localized",
                     "Multiply-adds the kernels execute per example"),
    "flops_effective": _number("FLOPs on non-zero weights", "localized",
                               "Multiply-adds whose weight is not zero (no dense kernel "
                               "skips zeros)"),
    "flops_vs_base": _ratio("Dense FLOPs vs baseline", "Dense FLOPs"),
    "achieved_flops_per_s": _number("Achieved FLOP/s", "compact",
                                    "Dense FLOPs per batch over the p50"),
    "arithmetic_intensity": _number("FLOPs per byte moved", "%.2f",
                                    "Arithmetic intensity: where the variant sits on the "
                                    "roofline"),
    "bound": _text("Roofline bound", "Memory- or compute-bound, from the roofline"),
    "error": _text("Error", "Why the variant failed"),
    "not_applicable": _text("n/a", "Why an instruction-set profile has no preview of this "
                                   "cell: its kernels ignore the cap (not a failure)"),
    "under_cap": _number("Under the cap", "percent", "The share of its multiply-adds whose "
                         "kernels obeyed its instruction-set profile's cap (read from the "
                         "kernels that ran)"),
}

PAIRED_CONFIG = {
    # A percent, as everywhere (benchmarks.report.formats): never 0.9694 beside 96.94%.
    "accuracy_a": _number("Accuracy (first)", "percent", "Accuracy in the first run"),
    "accuracy_b": _number("Accuracy (second)", "percent", "Accuracy in the second run"),
    "accuracy_change_pts": _number("Δ accuracy (pts)", "%+.2f",
                                   "From the first run to the second, in points"),
    "p_value": _number("p (paired)", "%.3f", "Paired test on the same test examples (exact "
                       "unconditional with few discordant pairs, Tango's score test otherwise)"),
    "within_noise": _check("within noise", "p >= 0.05: not a finding"),
    "p50_ms_a": _number("p50 ms (first)", "%.3f", "Median latency in the first run"),
    "p50_ms_b": _number("p50 ms (second)", "%.3f", "Median latency in the second run"),
    "p50_ratio": _number("p50 second/first", "%.2fx", "Latency ratio; different machines or "
                                                      "loads make it a rough guide"),
}


def table_frame(rows: list[dict]):
    """The rows as a table: the variant, where it sits on each swept setting, then every
    figure beside its change, the rest after."""
    import pandas as pd  # imported on first use: the first page draws without it
    df = pd.DataFrame(rows)
    if "accuracy_vs_base_ci" in df.columns:  # a [low, high] pair, shown as one cell
        df["accuracy_vs_base_ci"] = [
            f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if isinstance(ci, (list, tuple)) and len(ci) == 2
            else None for ci in df["accuracy_vs_base_ci"]]
    axes = [c for c in df.columns if c.startswith("axis:")]
    cols = ["variant", *axes] + [c for c in TABLE_COLUMNS[1:] if c in df.columns]
    return df[[c for c in cols if c in df.columns] +
              [c for c in df.columns if c not in cols]]


def column_config(df) -> dict:
    """The table's column settings, an axis column named for its setting."""
    config = dict(TABLE_CONFIG)
    for column in df.columns:
        if column.startswith("axis:"):
            config[column] = _text(column[5:], f"Where the variant sits on the swept "
                                               f"setting {column[5:]}")
        elif column not in config:  # a figure with no settings of its own: in words still
            floats = df[column].dtype.kind == "f"
            config[column] = _number(header(column), "%.3f", column) if floats else \
                _text(header(column), column)
    return config


def comparison_table(rows: list[dict], key: str, on_select=None):
    """The comparison table; with ``on_select`` (a callback), a click on a row picks it. A
    column no variant has a figure for (the mean over seeds of a one-seed run) is left out;
    a figure one variant lacks shows as "—"."""
    df = table_frame(rows)
    df = df[[c for c in df.columns if c == "variant" or df[c].notna().any()]]
    selection = {} if on_select is None else dict(on_select=on_select,
                                                  selection_mode="single-row")
    st.dataframe(df, hide_index=True, column_config=column_config(df), key=key,
                 placeholder=NOT_APPLICABLE, **selection)
    return df


def frontier_table(rows: list[dict], front: list[str]):
    """The Pareto frontier's variants, their figures formatted for reading."""
    import pandas as pd
    by_name = {r["variant"]: r for r in rows}

    def fmt(value, pattern):
        return NOT_APPLICABLE if value is None else pattern.format(value)
    return pd.DataFrame([{
        "Variant": md(name),  # st.table renders Markdown
        "Accuracy": fmt(by_name[name].get("accuracy"), "{:.2%}"),
        "Δ points": fmt(by_name[name].get("accuracy_vs_base"), "{:+.2f}")
        + (" (noise)" if by_name[name].get("within_noise") else ""),
        "p50 ms": fmt(by_name[name].get("p50_ms"), "{:.3f}"),
        "vs baseline": fmt(by_name[name].get("p50_ms_vs_base"), "{:.2f}x"),
        "Size MB": fmt(by_name[name].get("size_mb"), "{:.3f}")} for name in front])


def export_rows(card: dict) -> list[dict]:
    """The export's formats as a table (st.table renders Markdown): each format, its file or
    "—" with why, and the verification in words. An entry that is not a record (a card
    written by an older version holds a bare status text) reads as that text, never an
    AttributeError."""
    out = []
    for name, entry in (card.get("formats") or {}).items():
        if not isinstance(entry, dict):
            entry = {"status": str(entry)}
        written = entry.get("status") == "written"
        check = entry.get("verification") if isinstance(entry.get("verification"), dict) \
            else {}
        verified = "reloaded: the same predictions" if check.get("same_predictions") else \
            f"reloaded: accuracy {percent(check['accuracy'])}" if "accuracy" in check else \
            "reloaded" if check else ""
        out.append({
            "Format": md(name),
            "File": md(entry.get("file") or f"{NOT_APPLICABLE} (not written)"),
            "Status": md(entry.get("status") or "unknown"),
            "Why not": md("" if written else entry.get("reason") or "no reason recorded"),
            "Check": md(verified), "Note": md(entry.get("note") or "")})
    return out


DISTRIBUTED_KEYS = ["name", "workers", "compression", "amp", "throughput", "throughput_ci",
                    "scaling_efficiency", "efficiency_ci", "bytes_per_step",
                    "comm_ms_per_step", "step_ms", "loss", "accuracy", "oversubscribed",
                    "error"]


def distributed_rows(results: list[dict]) -> list[dict]:
    """The Distributed page's table: each run's figures beside its 95% interval (from the
    run's step times: the noise to read a difference against), through the one formatting
    layer (headers in words, percents, "—" with why)."""
    from benchmarks.distributed.record import scaling_table
    from benchmarks.views import scaling  # torch-free
    table = scaling_table(results)
    shown = [{**r, "throughput_ci": scaling.interval_text(scaling.throughput_interval(run)),
              "efficiency_ci": scaling.interval_text(scaling.efficiency_interval(run, table),
                                                     percent=True)}
             for r, run in zip(results, table)]
    return display_rows(shown, DISTRIBUTED_KEYS, reasons={
        "scaling_efficiency": "no one-worker run to compare with",
        "throughput_ci": "no step times recorded", "efficiency_ci": "no step times recorded",
        "step_ms": "no step times recorded"})


def paired_note(row: dict) -> str:
    """One sentence on a compared variant: is its accuracy change real?"""
    delta, p = row.get("accuracy_vs_base"), row.get("p_value_vs_base")
    if delta is None:
        return "No accuracy to compare."
    if p is None:
        return (f"Δ accuracy {delta:+.2f} points; no paired test: the two were not scored on "
                f"the same test examples.")
    verdict = "within noise" if p >= 0.05 else "a real difference"
    return (f"Δ accuracy {delta:+.2f} points, p = {p:.3g} (paired test on the same test "
            f"examples): {verdict}.")
