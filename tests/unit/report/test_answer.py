"""The statistics behind an answer: Tango's score interval for a paired difference (checked
against the published values of R's contingencytables), the bootstrap over timing rounds, and
the exploratory answer's rule on hand-made variants."""

from __future__ import annotations

import statistics

import pytest

from benchmarks.report.answer import exploratory_answer
from benchmarks.report.results import VariantResult
from benchmarks.report.stats import bootstrap_ratio, pack_bits, tango_interval, tango_lower


def test_tango_interval_matches_published_values():
    # contingencytables (Fagerland, Lydersen and Laake), Cavo et al. 2012: n12 = 6, n21 = 16,
    # N = 161: estimate -0.0621, 95% CI -0.1240 to -0.0054.
    low, high = tango_interval(6, 16, 161)
    assert (round(low, 4), round(high, 4)) == (-0.1240, -0.0054)
    # ratesci's README (petelaud/ratesci), pairbinci(x = c(1, 1, 7, 12), contrast = "RD",
    # method = "Score", skew = FALSE, bcf = FALSE), the Tango method on Fagerland et al.
    # 2014's example (Bentur et al. 2009: n12 = 1, n21 = 7, N = 21): lower -0.517232,
    # estimate -0.285714, upper -0.026003.
    bentur = tango_interval(1, 7, 21)
    assert (round(bentur[0], 6), round(bentur[1], 6)) == (-0.517232, -0.026003)
    # Symmetric in the discordant cells, and the interval holds its estimate.
    low2, high2 = tango_interval(16, 6, 161)
    assert low2 == pytest.approx(-high) and high2 == pytest.approx(-low)
    assert low < (6 - 16) / 161 < high


def test_tango_without_discordant_pairs_still_bounds_and_narrows_with_n():
    small, large = tango_interval(0, 0, 100), tango_interval(0, 0, 1000)
    assert small[0] < 0 < small[1] and large[0] < 0 < large[1]
    assert -large[0] < -small[0]
    # One-sided lower limit at 95% is the two-sided 90% interval's.
    assert tango_lower(3, 5, 200) == pytest.approx(tango_interval(3, 5, 200, 0.90)[0])
    with pytest.raises(ValueError, match="discordant"):
        tango_interval(5, 6, 10)


def test_bootstrap_over_rounds_brackets_the_ratio_and_needs_two_rounds():
    base = [[10.0, 10.2], [11.0, 11.1], [9.8, 10.0], [10.5, 10.4]]
    fast = [[5.0, 5.1], [5.6, 5.5], [4.9, 5.0], [5.2, 5.3]]
    out = bootstrap_ratio(base, fast)
    assert out["ci"][0] <= out["ratio"] <= out["ci"][1]
    assert out["ci"][0] > 1.5 and out["rounds"] == 4
    assert bootstrap_ratio(base[:1], fast[:1])["ci"] is None
    assert bootstrap_ratio([], fast) is None


def _variant(name, right, p50, rounds, techniques=("prune",)):
    return VariantResult.of(name=name, techniques=list(techniques),
                            accuracy=sum(right) / len(right),
                            correct_bits=pack_bits(right), n_test=len(right),
                            latency_samples_ms=[p50] * 20, round_p50_ms=rounds, size_bytes=1000)


def test_the_answer_is_the_fastest_variant_whose_interval_stays_within_the_margin():
    n = 2000
    base = _variant("baseline", [True] * 1900 + [False] * 100, 10.0,
                    [10.0, 10.3, 9.9, 10.1, 10.2], techniques=())
    same = _variant("same", [True] * 1900 + [False] * 100, 5.0, [5.0, 5.1, 4.9, 5.0, 5.2])
    # Faster still, but loses 3 points: outside a 1-point margin.
    worse = _variant("worse", [True] * 1840 + [False] * 160, 2.0, [2.0, 2.1, 1.9, 2.0, 2.05])
    # Within the margin but not faster beyond its noise.
    slow = _variant("slow", [True] * 1900 + [False] * 100, 10.0,
                    [9.0, 11.5, 9.5, 11.0, 10.2])
    answer = exploratory_answer([base, same, worse, slow])
    assert answer.variant == "same" and not answer.certified
    chosen = answer.chosen
    # The point is the statistic its interval resamples: the median of the paired rounds'
    # ratios (a pooled median beside a paired interval stood outside it).
    assert chosen.ratio == pytest.approx(statistics.median(
        b / v for b, v in zip([10.0, 10.3, 9.9, 10.1, 10.2], [5.0, 5.1, 4.9, 5.0, 5.2])))
    assert chosen.ratio_ci[0] <= chosen.ratio <= chosen.ratio_ci[1] and chosen.ratio_ci[0] > 1
    assert chosen.discordant == [0, 0] and "few discordant" in chosen.notes[0]
    assert {c.name: c.within_margin for c in answer.candidates} == {
        "same": True, "worse": False, "slow": True}
    assert not next(c for c in answer.candidates if c.name == "slow").faster
    assert exploratory_answer([base, worse], margin_pts=5).variant == "worse"
    none = exploratory_answer([base, worse])
    assert none.variant is None and "no variant keeps its accuracy" in none.reason
    assert "within 1 point of" in none.reason  # one point, not "1 points"
    assert "within 5 points of" in exploratory_answer([base, worse], margin_pts=5).reason
    assert len(none.candidates[0].accuracy_ci_pts) == 2 and n == base.scores.n_test


def test_bad_margins_confidences_and_objectives_are_refused_by_name():
    base = _variant("baseline", [True, False] * 50, 1.0, [1.0, 1.0], techniques=())
    for kwargs, word in (({"margin_pts": 0}, "margin"), ({"margin_pts": 60}, "margin"),
                         ({"confidence": 1.0}, "confidence"), ({"objective": "speed"},
                                                               "objective")):
        with pytest.raises(ValueError, match=word):
            exploratory_answer([base], **kwargs)


def test_the_answer_takes_its_margin_in_the_recommendations_one_shape():
    """Issue 33.4: one margin type. The exploratory answer reads a margin as ``--within``
    does (points, or a share of the baseline's accuracy), refuses the same values in one
    line, and the recommendation's Margin is the same class."""
    from benchmarks.recommend.request import Margin as RequestMargin
    from benchmarks.spec.margin import Margin
    assert RequestMargin is Margin
    base = _variant("baseline", [True] * 1900 + [False] * 100, 10.0,
                    [10.0, 10.3, 9.9, 10.1, 10.2], techniques=())
    worse = _variant("worse", [True] * 1840 + [False] * 160, 2.0, [2.0, 2.1, 1.9, 2.0, 2.05])
    # 5% of a 95% baseline: 4.75 points, wide enough for the 3-point loss.
    relative = exploratory_answer([base, worse], margin_pts="5%")
    assert relative.margin_pts == pytest.approx(4.75) and relative.variant == "worse"
    assert exploratory_answer([base, worse], margin_pts="1pt").variant is None
    for bad in (0, -1, 51, "1 banana", True):
        with pytest.raises(ValueError, match=r"^the margin must be a margin in \(0, 50\] "):
            exploratory_answer([base, worse], margin_pts=bad)
