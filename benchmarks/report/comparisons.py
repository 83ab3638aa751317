"""Every variant set against the baseline once, in the engine (``comparison_rows``): the
figures compared and which way is better, the paired test of accuracy on the same examples,
times against the baseline of the same deployment, the controls' gains, the Pareto front.
Pages and the CLI only render its rows."""

from __future__ import annotations

import math

from benchmarks.report import stats
from benchmarks.report.results import VariantResult
from benchmarks.report.seeds import seed_comparison


# The figures of the comparison table, with the direction that is better.
COMPARED = {
    "accuracy": "higher",
    "p50_ms": "lower",
    "throughput": "higher",
    "peak_memory_mb": "lower",
    "size_mb": "lower",
    "size_gzip_mb": "lower",
    "params": "lower",
    "nonzero_params": "lower",
    "flops": "lower",
    "flops_effective": "lower",
}
TIME_FIGURES = ("p50_ms", "throughput")


def find_baseline(results: list[VariantResult], name: str | None = None
                  ) -> VariantResult | None:
    """The named variant, else the first one without techniques that succeeded."""
    if name is not None:
        return next((r for r in results if r.name == name), None)
    return next((r for r in results if not r.techniques and r.ok), None)


def comparison_rows(results: list[VariantResult], baseline: str | None = None) -> list[dict]:
    """Every figure plus its change against the baseline: accuracy in points with its
    interval and a paired test on the same test examples; the others as a ratio (``x``
    suffix) so '0.25x size' reads the same for any unit. Latency ratios are taken only
    against a baseline timed on the same device (a CPU variant of a CUDA sweep against the
    baseline's CPU samples, taken in the same rounds); otherwise none is given."""
    base = find_baseline(results, baseline)
    base_row = base.flat_row() if base is not None and base.ok else {}
    references = _time_references(results, base)
    base_cpu = None
    if base is not None and base.timing.cpu_latency_samples_ms:
        base_cpu = base.timing.stats_of("cpu_latency_samples_ms").p50
    rows = []
    for result in results:
        row = result.flat_row()
        row["is_baseline"] = base is not None and result is base
        row["baseline_ref"] = None
        same_device = _device_type(result.device) == _device_type(base_row.get("device"))
        # Time against the eager baseline at the row's own batch size and threads.
        timed_ref = references.get(_deployment(result))
        time_row = timed_ref.flat_row() if timed_ref is not None else base_row
        if timed_ref is None and _deployment(result)[2] != "native":
            time_row = {}  # a profile's baseline n/a or failed: no ratio across profiles
        if timed_ref is not None and timed_ref is not base:
            same_device = _device_type(result.device) == _device_type(timed_ref.device)
        for key in COMPARED:
            value, ref = row.get(key), (time_row if key in TIME_FIGURES else base_row).get(key)
            if key in TIME_FIGURES and not same_device:
                # Never a CPU time against a GPU time: the CPU baseline if it was timed.
                ref = None
                if base_cpu and _device_type(result.device) == "cpu":
                    ref = base_cpu if key == "p50_ms" else \
                        result.timing.batch_size / (base_cpu / 1e3)
            if value is None or ref is None:
                row[f"{key}_vs_base"] = None
            elif key == "accuracy":
                row[f"{key}_vs_base"] = (value - ref) * 100.0  # points
            else:
                row[f"{key}_vs_base"] = value / ref if ref else None
        if row.get("p50_ms_vs_base") is not None:
            row["baseline_ref"] = ("baseline" if same_device
                                   else f"baseline on {_device_type(result.device)}")
            if timed_ref is not None and timed_ref is not base and same_device:
                row["baseline_ref"] = timed_ref.name
        row.update(_paired(result, base))
        row.update(seed_comparison(result, base))
        rows.append(row)
    _add_control_gains(results, rows)
    return rows


def _deployment(result: VariantResult) -> tuple:
    """Where a row was timed: its batch size, threads and instruction-set profile (a
    profile's rows were timed with its own baseline, in a process of their own)."""
    rt = result.runtime or {}
    return (result.timing.batch_size, rt.get("threads", result.axes.get("threads")),
            (rt.get("profile") or {}).get("name", "native"))


def _time_references(results: list[VariantResult], base: VariantResult | None) -> dict:
    """{(batch size, threads): the eager baseline row timed there}, for the rows of a sweep
    with deployment axes (runtime cells); empty otherwise, so every ratio is the baseline's."""
    if base is None or not any(r.runtime for r in results):
        return {}
    out = {}
    for r in results:
        rt = r.runtime or {}
        eager = rt.get("name", "eager") == "eager"
        if eager and r.ok and r.techniques == base.techniques and \
                rt.get("variant", r.name) == base.name:
            out.setdefault(_deployment(r), r)
    return out


def _device_type(device: str | None) -> str | None:
    return None if device is None else str(device).split(":")[0]


def _paired(result: VariantResult, base: VariantResult | None) -> dict:
    """The accuracy change against the baseline on the same test examples: its interval
    (points) and p-value from one test (``stats.paired_difference``: exact where discordant
    pairs are few, Tango's score test otherwise), so the interval excludes zero exactly when
    p < 0.05; and whether it is within noise (None where no pairing is possible)."""
    out = {"p_value_vs_base": None, "within_noise": None, "accuracy_vs_base_ci": None,
           "test_vs_base": None}
    mine, theirs = result.scores, None if base is None else base.scores
    if base is None or result is base or not (mine.correct_bits and theirs.correct_bits) \
            or mine.n_test != theirs.n_test:
        return out
    test = stats.paired_bits(mine.correct_bits, theirs.correct_bits, mine.n_test)
    out.update(p_value_vs_base=test["p_value"], within_noise=test["p_value"] >= stats.ALPHA,
               accuracy_vs_base_ci=test["ci_pts"], test_vs_base=test["test"])
    return out


def _add_control_gains(results: list[VariantResult], rows: list[dict]) -> None:
    """A distilled student against its scratch twin (same student, budget and seed): the
    paired test on the test examples, and with seeds the mean difference with its interval."""
    for result, row in zip(results, rows):
        row.update(gain_vs_control_pts=None, gain_vs_control_ci=None, p_value_vs_control=None,
                   control=None)
        if not result.ok or not _has_control(result):
            continue
        twin = next((c for c in results if _is_twin(result, c)), None)
        if twin is None:
            continue
        row["control"] = twin.name
        row["test_vs_control"] = None
        # The gain, its interval and its p-value from one test: over seeds the paired t-test
        # of the per-seed differences (never seed 0's paired test beside the seeds' mean),
        # otherwise the paired test on the test examples.
        test = None
        mine, theirs = result.scores, twin.scores
        if mine.seeds and mine.seeds == theirs.seeds and len(mine.seeds) >= 2:
            diffs = [100 * (a - b) for a, b in zip(mine.seed_accuracies, theirs.seed_accuracies)]
            test = stats.paired_t(diffs)
            if test is not None:
                row.update(gain_vs_control_pts=test["mean"], gain_vs_control_ci=test["ci"],
                           p_value_vs_control=test["p_value"], test_vs_control=test["test"])
        if test is None and result.scores.correct_bits and twin.scores.correct_bits \
                and result.scores.n_test == twin.scores.n_test:
            test = stats.paired_bits(mine.correct_bits, theirs.correct_bits, mine.n_test)
            row.update(gain_vs_control_pts=test["difference_pts"],
                       gain_vs_control_ci=test["ci_pts"], p_value_vs_control=test["p_value"],
                       test_vs_control=test["test"])
        if test is None and result.scores.accuracy is not None and twin.scores.accuracy is not None:
            row["gain_vs_control_pts"] = 100 * (result.scores.accuracy - twin.scores.accuracy)


def _has_control(result: VariantResult) -> bool:
    """A single technique whose registry entry brings a control (distillation's scratch
    twin)."""
    from optimizers import registry
    return len(result.techniques) == 1 and result.techniques[0] in registry.names() and \
        registry.get(result.techniques[0]).control is not None


def _is_twin(result: VariantResult, candidate: VariantResult) -> bool:
    from optimizers import registry
    control = registry.control(candidate.techniques[0]) if len(candidate.techniques) == 1 \
        else None
    if control is None or not candidate.ok or result.techniques != [control.of]:
        return False
    mine = result.config.get(control.of, {})
    theirs = candidate.config.get(control.name, {})
    return all(mine.get(f) == theirs.get(f) for f in control.uses)


def pareto_front(points: list[tuple[str, float, float]]) -> list[str]:
    """Names of the non-dominated (accuracy higher, latency lower) points, by latency."""
    front, best_acc = [], -math.inf
    for name, acc, lat in sorted(points, key=lambda p: (p[2], -p[1])):
        if acc > best_acc:
            front.append(name)
            best_acc = acc
    return front
