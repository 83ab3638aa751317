"""What the tables and the accuracy chart show when variants were trained with several seeds.

With ``--seeds N`` > 1 every trained variant is rebuilt from a baseline trained with each
further seed and scored. Seed 0's own figures (its accuracy, Wilson interval, exact McNemar
test against the baseline on the same test examples) stay in the JSON and the CSV as they
were; what people read (the text table, the page's table, the HTML report, the accuracy
chart) shows instead the mean over seeds with its Student-t 95% interval, and the change
against the baseline as the mean of the per-seed differences (each seed's variant against
the baseline trained with the same seed) with the paired t-test of those differences, its
interval and its p-value both (never seed 0's paired test beside the seeds' mean): the
recipe, not one draw of it. A note names it (``seeds_note``).
"""

from __future__ import annotations

from benchmarks.report import stats

# Row key shown -> the key of its figure over seeds.
SHOWN_FROM_SEEDS = {
    "accuracy": "accuracy_seed_mean",
    "accuracy_ci_low": "accuracy_seed_ci_low",
    "accuracy_ci_high": "accuracy_seed_ci_high",
    "accuracy_vs_base": "accuracy_seed_vs_base",
    # The change's interval and p-value both from the paired t-test over seeds.
    "accuracy_vs_base_ci": "accuracy_seed_vs_base_ci",
    "p_value_vs_base": "p_value_seeds_vs_base",
    "test_vs_base": "test_seeds_vs_base",
    "within_noise": "within_noise_seeds",
}


def seed_comparison(result, base) -> dict:
    """A comparison row's figures over seeds (``VariantResult``s): the interval of the mean,
    and against the baseline the paired t-test of the per-seed differences (in points)."""
    out = {"accuracy_seed_n": None, "accuracy_seed_ci_low": None,
           "accuracy_seed_ci_high": None, "accuracy_seed_vs_base": None,
           "accuracy_seed_vs_base_ci": None, "p_value_seeds_vs_base": None,
           "within_noise_seeds": None, "test_seeds_vs_base": None}
    summary = result.scores.seed_summary
    if summary is None:
        return out
    out["accuracy_seed_n"] = len(summary["accuracies"])
    if summary["ci"]:
        out["accuracy_seed_ci_low"], out["accuracy_seed_ci_high"] = summary["ci"]
    if result is base:
        out["accuracy_seed_vs_base"] = 0.0
        return out
    if base is None or base.scores.seed_summary is None:
        return out
    theirs = dict(zip(base.scores.seeds, base.scores.seed_accuracies))
    diffs = [100.0 * (mine - theirs[seed])
             for seed, mine in zip(result.scores.seeds, result.scores.seed_accuracies)
             if seed in theirs]
    test = stats.paired_t(diffs)
    if test is not None:
        out.update(accuracy_seed_vs_base=test["mean"], accuracy_seed_vs_base_ci=test["ci"],
                   p_value_seeds_vs_base=test["p_value"], test_seeds_vs_base=test["test"],
                   within_noise_seeds=test["p_value"] >= stats.ALPHA)
    return out


def seeds_shown(rows: list[dict]) -> int | None:
    """How many seeds the shown figures are the mean of (None: one seed, seed 0 shown)."""
    counts = [r.get("accuracy_seed_n") or 0 for r in rows]
    most = max(counts, default=0)
    return most if most >= 2 else None


def shown_rows(rows: list[dict]) -> list[dict]:
    """The comparison rows as the tables and the chart show them: with seeds, each row's
    accuracy, interval, change, p-value and noise flag over seeds (seed 0's accuracy kept
    beside as ``accuracy_seed0``), and ``accuracy_shows`` saying which. Without, the rows."""
    n = seeds_shown(rows)
    if n is None:
        return rows
    out = []
    for row in rows:
        shown = dict(row)
        shown["accuracy_seed0"] = row.get("accuracy")
        if (row.get("accuracy_seed_n") or 0) >= 2:
            for key, source in SHOWN_FROM_SEEDS.items():
                shown[key] = row.get(source)
            shown["accuracy_shows"] = f"mean of {row['accuracy_seed_n']} seeds"
        else:  # its further seeds failed: its one seed is shown, and says so
            shown.update({k: None for k in SHOWN_FROM_SEEDS if k != "accuracy"})
            shown["accuracy_shows"] = "seed 0 only"
        out.append(shown)
    return out


def seeds_note(rows: list[dict]) -> str | None:
    """The sentence that names what the accuracy columns show, for rows over seeds."""
    n = seeds_shown(rows)
    if n is None:
        return None
    return (f"acc %, 95% CI, Δ pts, Δ 95% CI and =: over {n} seeds: the mean, its "
            f"Student-t 95% interval, the mean of each seed's difference from the baseline "
            f"trained with the same seed with the paired t-test's interval, and = where that "
            f"test gives p >= 0.05; seed 0's own figures are in the JSON and CSV")
