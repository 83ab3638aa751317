"""No table where a row's interval and its p-value disagree: stored runs across the regimes
(few discordant pairs, none, many; gains and losses), read back through the code the tables
use (the store, ``RunReport``'s rows, shown rows, JSON document and compared runs; the
sensitivity map's row; the certificate's and the answer's tests), and for every row the
interval excludes zero exactly when p < 0.05."""

from __future__ import annotations

import pytest

from benchmarks.recommend.certificate import judge, order_candidates
from benchmarks.recommend.split import Split
from benchmarks.report import stats
from benchmarks.report.answer import candidate
from benchmarks.report.document import RunReport, compare_runs
from benchmarks.report.results import VariantResult
from benchmarks.sensitivity.cells import paired
from benchmarks.store.database import ResultsStore

# (b, c) against the baseline: b the examples only the variant gets right. The row
# (b=0, c=5, n=180) among them; both sides of p = 0.05; the score test's regime at n=900.
REGIMES = {180: [(0, 5), (5, 0), (0, 6), (1, 7), (3, 9), (0, 0), (2, 2), (0, 3), (9, 20)],
           900: [(12, 27), (10, 30), (40, 62), (40, 70), (30, 30), (0, 9)]}


def _bits(n: int, b: int, c: int) -> tuple[list[bool], list[bool]]:
    """(variant, baseline) correctness with b and c discordant pairs against one baseline
    (right on the first 70% of the examples)."""
    right = int(0.7 * n)
    base = [True] * right + [False] * (n - right)
    mine = list(base)
    mine[:c] = [False] * c
    mine[right:right + b] = [True] * b
    return mine, base


def _variant(name, bits, techniques=("int8",), **extra):
    return VariantResult.of(name=name, techniques=list(techniques), correct_bits=stats.pack_bits(
        bits), n_test=len(bits), accuracy=sum(bits) / len(bits), **extra)


def _stored_run(store, n, seeds=False):
    """A run of the regimes at ``n`` examples, stored and read back as the tables read it."""
    _, base_bits = _bits(n, 0, 0)
    variants = [_variant("baseline", base_bits, techniques=())]
    for b, c in REGIMES[n]:
        mine, base = _bits(n, b, c)
        assert base == base_bits
        variants.append(_variant(f"v-{b}-{c}", mine))
    if seeds:  # three seeds each: the shown change is the paired t-test's
        for i, v in enumerate(variants):
            v.scores.seeds = [0, 1, 2]
            v.scores.seed_accuracies = [v.scores.accuracy, v.scores.accuracy - 0.002 * (i % 3),
                                 v.scores.accuracy + 0.001 * i]
    run = store.start_run(model="toy", dataset="digits", device="cpu", spec={},
                          environment={})
    for v in variants:
        store.add_variant(run, v)
    store.finish_run(run, "complete")
    return RunReport.from_stored(store.run(run))


def _agrees(ci, p):
    low, high = ci
    return (low > 0 or high < 0) == (p < stats.ALPHA)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    store = ResultsStore(tmp_path_factory.mktemp("store") / "results.sqlite")
    return {n: _stored_run(store, n) for n in REGIMES} | {"seeds": _stored_run(store, 180, True)}


def test_every_sweep_row_and_its_json_agree(runs):
    checked = 0
    for key in (180, 900):
        report = runs[key]
        for row in report.rows():
            if row["p_value_vs_base"] is None:
                continue
            assert _agrees(row["accuracy_vs_base_ci"], row["p_value_vs_base"]), row["variant"]
            assert row["within_noise"] == (row["p_value_vs_base"] >= stats.ALPHA)
            checked += 1
        for v in report.document()["variants"]:
            if v.get("p_value_vs_baseline") is not None:
                assert _agrees(v["vs_baseline"]["accuracy_ci"], v["p_value_vs_baseline"])
                assert v["vs_baseline"]["test"] in (stats.EXACT_TEST, stats.SCORE_TEST)
        assert "Δ 95% CI" in report.table()
    assert checked == sum(len(r) for r in REGIMES.values())
    # The row: an interval excluding zero now stands beside p < 0.05.
    row = next(r for r in runs[180].rows() if r["variant"] == "v-0-5")
    assert row["accuracy_vs_base_ci"][1] < 0 and row["p_value_vs_base"] < 0.05
    assert row["test_vs_base"] == stats.EXACT_TEST
    tango = next(r for r in runs[900].rows() if r["variant"] == "v-40-70")
    assert tango["test_vs_base"] == stats.SCORE_TEST


def test_rows_over_seeds_show_the_t_tests_interval_and_p_value(runs):
    report = runs["seeds"]
    shown = [r for r in report.shown_rows() if r.get("p_value_vs_base") is not None]
    assert shown
    for row in shown:
        assert row["test_vs_base"] == "paired t-test over seeds"
        assert _agrees(row["accuracy_vs_base_ci"], row["p_value_vs_base"])


def test_compared_runs_agree(runs):
    a, b = runs[180], runs["seeds"]  # the same bits, so every change is zero
    rows = compare_runs(a, b)
    assert rows and all(_agrees(r["accuracy_change_ci"], r["p_value"]) for r in rows)


def test_vs_control_with_seeds_uses_the_across_seed_test():
    """The issue's row: a three-seed gain beside seed 0's McNemar p. Now the gain, its
    interval and its p-value are the paired t-test's."""
    n = 180
    student, scratch = _bits(n, 2, 9)
    config = {"student": "tiny", "epochs": 2}
    base = _variant("baseline", scratch, techniques=())
    distilled = _variant("distill", student, techniques=("distill",), config={
        "distill": config}, seeds=[0, 1, 2], seed_accuracies=[0.70, 0.71, 0.705])
    control = _variant("scratch", scratch, techniques=("student-scratch",), config={
        "student-scratch": config}, seeds=[0, 1, 2], seed_accuracies=[0.72, 0.728, 0.726])
    rows = {r["variant"]: r for r in RunReport(variants=[base, distilled, control],
                                               baseline="baseline").rows()}
    row = rows["distill"]
    assert row["control"] == "scratch" and row["test_vs_control"] == "paired t-test over seeds"
    test = stats.paired_t([100 * (a - b) for a, b in zip([0.70, 0.71, 0.705],
                                                         [0.72, 0.728, 0.726])])
    assert row["p_value_vs_control"] == pytest.approx(test["p_value"])
    assert row["gain_vs_control_ci"] == pytest.approx(test["ci"])
    assert _agrees(row["gain_vs_control_ci"], row["p_value_vs_control"])


@pytest.mark.parametrize("n", sorted(REGIMES))
def test_sensitivity_certificate_and_answer_rows_agree(n):
    # The first n examples certify; the search's n (the baseline's own bits) are not read.
    split = Split(0, 2 * n, tuple(range(n, 2 * n)), tuple(range(n)))
    for b, c in REGIMES[n]:
        mine, base = _bits(n, b, c)
        cell = paired(mine, base, 0.95)
        assert _agrees(cell["accuracy_change_ci"], cell["p_value"]), (b, c)
        tested = order_candidates([{"name": "v", "ratio": 2.0}])[0]
        certified = judge(tested, _variant("v", mine + base),
                          _variant("baseline", base + base, ()), split, 2.0, 0.95)
        assert (tested.b, tested.c, tested.n) == (b, c, n)
        assert certified == (tested.lower_pts > -2.0) == (tested.p_value < 0.05)
        assert _agrees(tested.interval_pts, stats.paired_difference(b, c, n)["p_value"])
        judged = candidate(_variant("v", mine), _variant("baseline", base, ()), 2.0, 0.95,
                           "size")
        assert judged.within_margin == (judged.accuracy_lower_pts > -2.0) \
            == (judged.p_value < 0.05)


def test_the_pages_table_shows_the_changes_interval_beside_p(runs):
    from dashboard.tables import TABLE_COLUMNS, table_frame
    frame = table_frame(runs[180].shown_rows())
    cols = list(frame.columns)
    assert cols.index("accuracy_vs_base_ci") == cols.index("p_value_vs_base") - 1
    row = frame[frame["variant"] == "v-0-5"].iloc[0]
    low, high = (float(x) for x in row["accuracy_vs_base_ci"].strip("[]").split(","))
    assert high < 0 and row["p_value_vs_base"] < 0.05 and "test_vs_base" in TABLE_COLUMNS
