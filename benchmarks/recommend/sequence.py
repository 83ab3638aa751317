"""What the certificate tests, and in which order: the front members faster than the
baseline beyond noise, each with its p-value at the margin on the search split.

A candidate enters only when its search-phase speed-up is above ``--min-speedup`` beyond
noise (the lower end of its interval over the search's timing rounds; a counted objective's
ratio itself); the front members left out are listed as "not faster" and spend no test. The
order's basis is each candidate's p-value at the margin on the *search* split, the largest
over its example risks (accuracy, agreement: the certificate's own tests, on the other half
of the examples), as Pareto Testing orders its hypotheses (Laufer-Goldshtein et al., ICLR
2023); the latency limit is judged on the final timing alone. All of it reads the search
alone, before any certify bit, so the certificate's error rate holds. Torch-free.
"""

from __future__ import annotations

from benchmarks.recommend.risks import Accuracy, Risk, image_tests
from benchmarks.recommend.search import candidate_trials
from benchmarks.recommend.split import Split
from benchmarks.report import stats
from benchmarks.report.answer import COUNTED_OBJECTIVES


def faster_beyond_noise(ratio: float | None, ci: list[float] | None, objective: str,
                        min_speedup: float) -> bool:
    """Whether a search-phase ratio is above ``min_speedup`` beyond its noise: its interval's
    lower end, or (counted objectives, which carry no noise) the ratio itself."""
    if ratio is None:
        return False
    if objective in COUNTED_OBJECTIVES or not ci:
        return ratio > min_speedup if objective in COUNTED_OBJECTIVES else False
    return ci[0] > min_speedup


def search_p(mine, base, split: Split, margin_pts: float, extra: tuple[Risk, ...] = ()
             ) -> float | None:
    """The order's basis: the largest p-value of a candidate's example risks (accuracy,
    agreement) on the search split, from two ``VariantResult``s' bits and classes; the
    latency risk is judged on the final timing alone."""
    if not (mine.scores.correct_bits and base.scores.correct_bits
            and mine.scores.n_test == split.n == base.scores.n_test):
        return None
    tests, _ = image_tests(mine, base, split, split.search, margin_pts,
                           tuple(r for r in extra if r.name != "latency"))
    ps = []
    for t in tests:
        if isinstance(t, Accuracy):
            ps.append(stats.noninferiority_p(t.b, t.c, t.n, t.margin, t.forced))
        else:
            ps.append(t.figures(0.05)["p"])
    return max(ps)


def pick(trials, results: dict, base, split: Split, margin_pts: float, request
         ) -> tuple[list[dict], list[dict]]:
    """(the candidates, each {"name", "ratio", "ratio_ci", "change_pts", "variant",
    "runtime", "search_p"}; the front members left out as not faster): the front of the
    trials faster than ``request.min_speedup`` beyond noise (``search.candidate_trials``, at
    most ``request.max_candidates``)."""
    def faster(t) -> bool:
        return faster_beyond_noise(t.ratio, t.ratio_ci, request.objective,
                                   request.min_speedup)
    front = candidate_trials([t for t in trials if faster(t)], request.max_candidates)
    slow = [t for t in candidate_trials(trials, request.max_candidates) if not faster(t)]
    not_faster = [{"name": t.name, "search_ratio": t.ratio, "search_ratio_ci": t.ratio_ci}
                  for t in slow]
    return [{"name": t.name, "ratio": t.ratio, "change_pts": t.search_change_pts,
             "ratio_ci": t.ratio_ci, "variant": t.variant, "runtime": t.runtime,
             "search_p": search_p(results[t.name], base, split, margin_pts, request.risks)}
            for t in front], not_faster
