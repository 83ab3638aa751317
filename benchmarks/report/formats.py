"""One formatting layer for every figure a person reads: the dashboard's tables and the HTML
report. Accuracy as a percent with two decimals (96.94%, everywhere, never 0.9694), times in
ms to three significant figures, changes in signed points, intervals as [low, high], headers
in words, and "—" with the reason where a figure was not measured (never "None"). Torch-free
and Streamlit-free: plain values in, strings out."""

from __future__ import annotations

import math
import re

MISSING = "—"
NOT_MEASURED = "not measured"

# Headers in words for the keys the engine's records use; any other key reads as words with
# its unit (``step_ms`` -> "Step (ms)").
HEADERS = {
    "name": "Name", "variant": "Variant", "run": "Run", "run_id": "Run",
    "accuracy": "Accuracy", "accuracy_a": "Accuracy (first)",
    "accuracy_b": "Accuracy (second)", "accuracy_change": "Δ accuracy (points)",
    "accuracy_change_pts": "Δ accuracy (points)", "accuracy_change_ci": "Δ 95% CI (points)",
    "accuracy_vs_base": "Δ accuracy (points)", "p_value": "p (paired)",
    "within_noise": "Within noise", "test": "Paired test", "p50_ms": "Latency p50 (ms)",
    "p50_ms_a": "p50 (ms, first)", "p50_ms_b": "p50 (ms, second)",
    "p50_ratio": "p50 second/first", "workers": "Workers", "compression": "Compression",
    "amp": "Mixed precision", "throughput": "Samples/s", "throughput_ci": "Samples/s 95% CI",
    "scaling_efficiency": "Scaling efficiency", "efficiency_ci": "Efficiency 95% CI",
    "bytes_per_step": "Bytes sent per step", "comm_ms_per_step": "Communication (ms per step)",
    "step_ms": "Step (ms)", "loss": "Loss", "oversubscribed": "More workers than cores",
    "error": "Error", "root": "Layer group", "level": "Level",
    "latency_share": "Share of latency", "macs_removed": "Multiply-adds removed",
    "sqnr_db": "SQNR (dB)", "group_sqnr_db": "Group SQNR (dB)",
    "evaluated_on": "Evaluated on", "params": "Parameters", "size_mb": "Size (MB)",
    "peak_memory_mb": "Peak memory (MB)", "techniques": "Techniques", "device": "Ran on",
}

# How a key's value reads, by the key: accuracy-like fractions as percents, shares too.
PERCENT_KEYS = {"accuracy", "accuracy_a", "accuracy_b", "scaling_efficiency", "macs_removed",
                "latency_share", "accuracy_seed_mean", "accuracy_seed0"}
POINTS_KEYS = {"accuracy_change", "accuracy_change_pts", "accuracy_vs_base",
               "gain_vs_control_pts"}
RATIO_KEYS = {"p50_ratio"}
UNITS = (("_ms", "ms"), ("_mb", "MB"), ("_db", "dB"), ("_pts", "points"), ("_s", "s"))


def number(value) -> float | None:
    """A finite number, or None (a bool, a text, NaN and infinity are not figures)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def missing(reason: str | None = None) -> str:
    """What an absent figure shows: "—", with why in words."""
    return f"{MISSING} ({reason})" if reason else MISSING


def percent(fraction, reason: str | None = NOT_MEASURED) -> str:
    """A fraction as a percent with two decimals: 0.9694 -> "96.94%"."""
    value = number(fraction)
    return missing(reason) if value is None else f"{100 * value:.2f}%"


def points(value, reason: str | None = NOT_MEASURED) -> str:
    """A change in percentage points, signed: "+1.25"."""
    value = number(value)
    return missing(reason) if value is None else f"{value:+.2f}"


def significant(value, digits: int = 3) -> str:
    """A figure to ``digits`` significant figures with at most four decimals, never in
    exponent form (0.0012, 12.3, 1,230): what a time or a p-value reads as."""
    value = number(value)
    if value is None:
        return MISSING
    if value == 0:
        return "0"
    if abs(value) >= 10 ** digits:
        return f"{value:,.0f}"
    # At most four decimals (what a person reads); below that, the bound it is under.
    decimals = min(4, max(0, digits - 1 - math.floor(math.log10(abs(value)))))
    if abs(value) < 0.00005:
        return "<0.0001" if value > 0 else ">-0.0001"
    return f"{value:.{decimals}f}"


def ms(value, reason: str | None = NOT_MEASURED) -> str:
    """A time in milliseconds to three significant figures: "12.3 ms"."""
    return missing(reason) if number(value) is None else f"{significant(value)} ms"


def plain(value, reason: str | None = NOT_MEASURED) -> str:
    """Any other cell: a number to four significant figures at most (never 16 digits), a
    whole number with separators, a flag as yes/no, an interval as [low, high], text as it
    is, nothing as "—" with the reason."""
    if value is None:
        return missing(reason)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return missing(reason)
        if value.is_integer() and abs(value) >= 1e4:
            return f"{value:,.0f}"
        text = significant(value, 4)  # 0.30000000000000004 -> 0.3
        return text.rstrip("0").rstrip(".") if "." in text else text
    if isinstance(value, (list, tuple)):
        if len(value) == 2 and all(number(v) is not None for v in value):
            return f"[{significant(value[0], 4)}, {significant(value[1], 4)}]"
        return ", ".join(plain(v, None) for v in value)
    return str(value)


def header(key: str) -> str:
    """A record's key in words: a known header, else words with its unit."""
    if key in HEADERS:
        return HEADERS[key]
    if key.startswith("axis:"):
        return key[5:]
    words = key
    for suffix, unit in UNITS:
        if words.endswith(suffix) and len(words) > len(suffix):
            words = f"{words[:-len(suffix)]} ({unit})"
            break
    words = re.sub(r"_+", " ", words).strip()
    return words[:1].upper() + words[1:]


def cell(key: str, value, reason: str | None = NOT_MEASURED) -> str:
    """One figure as a table shows it, by what its key measures."""
    if key in PERCENT_KEYS:
        return percent(value, reason) if not isinstance(value, str) else value
    if key in POINTS_KEYS or key.endswith("_pts"):
        return points(value, reason) if not isinstance(value, str) else value
    if key in RATIO_KEYS:
        return missing(reason) if number(value) is None else f"{number(value):.2f}x"
    if (key.endswith("_ms") or "_ms_" in key) and not isinstance(value, str):
        return ms(value, reason)
    if key in ("p_value", "p"):
        return missing(reason) if number(value) is None else significant(value)
    if key.endswith("_ci") and isinstance(value, (list, tuple)) and len(value) == 2 \
            and key.startswith("accuracy"):
        return f"[{points(value[0])}, {points(value[1])}]"
    return plain(value, reason)


def display_rows(rows: list[dict], keys: list[str] | None = None,
                 reasons: dict[str, str] | None = None) -> list[dict]:
    """Records as a table reads them: headers in words, every figure formatted, "—" with the
    reason where a figure is absent (``reasons``: per key; a failed row's figures say it
    failed; an empty error cell is blank)."""
    keys = keys or list(dict.fromkeys(k for r in rows for k in r))
    reasons = reasons or {}
    out = []
    for r in rows:
        failed = bool(r.get("error"))
        line = {}
        for k in keys:
            if k == "error":
                line[header(k)] = "" if not r.get(k) else str(r[k])
                continue
            why = "the run failed" if failed else \
                f"n/a: {r['not_applicable']}" if r.get("not_applicable") else \
                reasons.get(k, NOT_MEASURED)
            line[header(k)] = cell(k, r.get(k), why)
        out.append(line)
    return out


def readable(value):
    """A record as a person reads it whole (the Environment tab's JSON): every float to six
    significant figures and at most four decimals (95084778989.40602 -> 95084800000.0,
    3.240881777617619 -> 3.2409), the rest as it is; what the download holds is unchanged."""
    if isinstance(value, float) and math.isfinite(value):
        return round(float(f"{value:.6g}"), 4)
    if isinstance(value, dict):
        return {k: readable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [readable(v) for v in value]
    return value
