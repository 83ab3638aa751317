"""The answer a run gives: the fastest variant whose accuracy is within a margin of the
baseline's, at a stated confidence, and how much faster it is, with intervals on both.

``exploratory_answer`` reads any run. Accuracy: the one-sided lower limit for the paired
difference (the variant against the baseline on the same test examples) must be above
-margin, from the certificate's test (``stats.noninferiority``: exact unconditional where
discordant pairs are few, Tango's score test otherwise; its p-value beside it). Speed: the objective's ratio to the
baseline, with a bootstrap interval over the interleaved timing rounds
(``stats.bootstrap_ratio``); a variant counts as faster only when that interval's lower end is
above 1. The answer is *exploratory*: the same examples chose it and judged it, so its
confidence is not a guarantee. A certified answer (``recommend``) keeps the data that chooses
apart from the data that judges. "Within noise" (a McNemar p above 0.05) is never taken for
"as accurate": absence of evidence is not equivalence, and only the interval decides.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from benchmarks.report import stats
from benchmarks.report.comparisons import find_baseline
from benchmarks.report.results import VariantResult
from benchmarks.spec.margin import Margin

__all__ = ["OBJECTIVES", "Answer", "Candidate", "exploratory_answer", "objective_ratio"]

# What "faster" (or better) means: the ratio baseline / variant of these figures (latencies,
# sizes, memory: smaller is better), or variant / baseline for throughput.
OBJECTIVES = ("p50", "p99", "throughput", "size", "memory")
DEFAULT_MARGIN_PTS = 1.0
# Fewer discordant pairs than this and the score interval rests on very little: say so.
FEW_DISCORDANT = 10


@dataclass
class Candidate:
    name: str
    accuracy_change_pts: float
    accuracy_ci_pts: list[float]      # two-sided interval at the confidence
    accuracy_lower_pts: float         # one-sided lower limit at the confidence
    discordant: list[int]             # [b, c]: only the variant right, only the baseline
    n: int
    ratio: float | None               # the objective, baseline over variant (bigger: better)
    ratio_ci: list[float] | None
    within_margin: bool
    faster: bool                      # the ratio's interval (or, without one, it) above 1
    notes: list[str] = field(default_factory=list)
    p_value: float | None = None      # the margin's test (H0 theta <= -margin)
    test: str | None = None           # which test gave it and the limits (stats.exact_rule)


@dataclass
class Answer:
    variant: str | None               # None: no variant qualifies
    margin_pts: float
    confidence: float
    objective: str
    certified: bool = False
    reason: str = ""
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def chosen(self) -> Candidate | None:
        return next((c for c in self.candidates if c.name == self.variant), None)

    def to_dict(self) -> dict:
        return asdict(self)


# The objectives that are counted, not timed: their ratios carry no noise.
COUNTED_OBJECTIVES = ("size", "memory")


# How a timed ratio's point is taken: the median of the paired rounds' ratios, the statistic
# its interval resamples; "pooled" (every sample's median over every sample's median) is how
# answers stored before the fifth wave took it, and how their certificates are recomputed.
PAIRED, POOLED = "median of paired round ratios", "pooled medians"


def objective_ratio(variant: VariantResult, base: VariantResult, objective: str,
                    statistic: str = PAIRED) -> tuple[float | None, list[float] | None]:
    """(the objective's ratio, bigger is better, and its bootstrap interval over the timing
    rounds both were timed in; None where it has none): baseline over variant for latencies,
    sizes and memory, variant over baseline for throughput. With two or more paired rounds
    the point is the median of the rounds' ratios, the statistic the interval resamples (a
    pooled median beside a paired interval stood outside it); p99 and one round take the
    pooled figure, without an interval."""
    if objective in COUNTED_OBJECTIVES:  # counted, not timed: no noise to bound
        key = "size_bytes" if objective == "size" else "peak_memory_bytes"
        mine, ref = getattr(variant.cost, key), getattr(base.cost, key)
        return (ref / mine if mine and ref else None), None
    if variant.device.split(":")[0] != base.device.split(":")[0]:
        return None, None  # no latency ratio across devices
    mine, ref = variant.timing.latency, base.timing.latency
    if mine is None or ref is None:
        return None, None
    if objective == "throughput":
        theirs = base.timing.throughput
        point = (variant.timing.throughput or 0) / theirs if theirs else None
    else:
        figure = "p99" if objective == "p99" else "p50"
        point = getattr(ref, figure) / getattr(mine, figure)
    if objective == "p99":
        return point, None
    # Throughput at the median latency is batch / p50: its gain is the p50 ratio, so both
    # resample baseline over variant (reference first).
    if statistic == POOLED:
        boot = stats.bootstrap_ratio([[x] for x in base.timing.round_p50_ms],
                                     [[x] for x in variant.timing.round_p50_ms])
        return point, (boot["ci"] if boot else None)
    paired = stats.paired_ratio(base.timing.round_p50_ms, variant.timing.round_p50_ms)
    if paired is None or paired["ci"] is None:
        return point, None
    return paired["ratio"], paired["ci"]


def candidate(variant: VariantResult, base: VariantResult, margin_pts: float,
              confidence: float, objective: str) -> Candidate | None:
    """The variant judged against the baseline; None where it cannot be paired."""
    if not (variant.ok and variant.scores.correct_bits and base.scores.correct_bits
            and variant.scores.n_test == base.scores.n_test and variant.scores.n_test):
        return None
    n = variant.scores.n_test
    b, c = stats.discordant(stats.unpack_bits(variant.scores.correct_bits, n),
                            stats.unpack_bits(base.scores.correct_bits, n))
    # The margin's test and the two-sided interval: the certificate's rule (exact where
    # discordant pairs are few), the lower limit above -margin exactly when p < alpha.
    test = stats.noninferiority(b, c, n, margin_pts / 100, confidence)
    two_sided = stats.paired_difference(b, c, n, confidence)
    lower = test["lower"]
    ratio, ratio_ci = objective_ratio(variant, base, objective)
    notes = []
    if b + c < FEW_DISCORDANT:
        notes.append(f"few discordant pairs ({b + c})")
    if ratio is not None and ratio_ci is None and objective not in COUNTED_OBJECTIVES:
        notes.append("no interval for the speed-up (timed in one round)")
    faster = ratio is not None and (ratio_ci[0] > 1 if ratio_ci else ratio > 1)
    return Candidate(name=variant.name, accuracy_change_pts=100 * (b - c) / n,
                     accuracy_ci_pts=two_sided["ci_pts"], accuracy_lower_pts=100 * lower,
                     discordant=[b, c], n=n, ratio=ratio, ratio_ci=ratio_ci,
                     within_margin=bool(test["rejected"]), faster=faster, notes=notes,
                     p_value=test["p_value"], test=test["test"])


def exploratory_answer(variants: list[VariantResult], baseline: str | None = None, *,
                       margin_pts: float | str | Margin = DEFAULT_MARGIN_PTS,
                       confidence: float = stats.CONFIDENCE, objective: str = "p50") -> Answer:
    """The fastest variant of a run within ``margin_pts`` of its baseline at ``confidence``
    (see the module's docstring), or none, with the reason. The margin is a ``Margin``, its
    text (``1pt``, ``2%``: a share of the baseline's accuracy) or a number of points."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}; got {objective!r}")
    margin = margin_pts if isinstance(margin_pts, Margin) else Margin.parse(margin_pts,
                                                                            "the margin")
    if not 0.5 < confidence < 1:
        raise ValueError(f"confidence must be in (0.5, 1); got {confidence!r}")
    base = find_baseline(variants, baseline)
    accuracy = base.scores.accuracy if base is not None and base.ok else None
    # A share of a baseline that has no accuracy cannot be said in points: its upper bound
    # stands in while the answer says why there is none.
    margin_pts = margin.points(accuracy) if accuracy is not None else margin.upper_points
    answer = Answer(None, margin_pts, confidence, objective)
    if base is None or not base.ok or not base.scores.correct_bits:
        answer.reason = "the baseline has no per-example accuracy to compare against"
        return answer
    for v in variants:
        if v is not base:
            judged = candidate(v, base, margin_pts, confidence, objective)
            if judged is not None:
                answer.candidates.append(judged)
    good = [c for c in answer.candidates if c.within_margin and c.faster]
    points = f"{margin_pts:g} point{'' if margin_pts == 1 else 's'}"
    if good:
        best = max(good, key=lambda c: c.ratio)
        answer.variant = best.name
        answer.reason = (f"the fastest variant whose accuracy is within {points} "
                         f"of the baseline at {confidence:.0%} confidence (exploratory: the "
                         f"same test examples chose it and judged it)")
    elif not any(c.within_margin for c in answer.candidates):
        answer.reason = (f"no variant keeps its accuracy within {points} of the "
                         f"baseline at {confidence:.0%} confidence")
    else:
        answer.reason = (f"no variant within {points} is "
                         f"{'faster' if objective in ('p50', 'p99', 'throughput') else 'better'}"
                         f" than the baseline beyond its noise")
    return answer
