"""The certificate: which of the search's candidates is provably within delta of the baseline,
and how much faster it is.

- **Order, fixed first.** The candidates are ordered by their search-phase speed, slowest
  first (``order_candidates``), before a single certify bit is read.
- **One test per candidate, one error rate.** On the certify split, paired on the same
  examples: b = #(candidate right, baseline wrong), c = #(candidate wrong, baseline right),
  n = |certify|, theta = (b - c) / n; H0 theta <= -delta against H1 theta > -delta, rejected
  when its p-value is below alpha, which is when the one-sided lower limit of the same test is
  above -delta (``stats.noninferiority``: the exact unconditional test where b + c is below
  ``stats.EXACT_BELOW``, Tango's score test from there on; each row names its test). Tested in the fixed order, stopping at the first failure: this
  fixed-sequence procedure keeps the family-wise error at alpha = 1 - confidence without
  splitting it, because the order was fixed before the certify data were seen. Every
  candidate before the stop is certified.
- **The speed claim.** Among the certified (those faster than the baseline beyond noise, where
  any is), the winner is the last in the fixed order, the search's fastest, unless the final
  timing shows another faster than it beyond noise (``_fastest``): two equally fast
  candidates do not swap places with the timing noise of a rerun. Its ratio to the baseline
  has a bootstrap interval over the timing rounds both were timed in
  (``answer.objective_ratio``); "faster" only when that interval's lower end is above 1. The
  interval is stated with its paired rounds and its nominal coverage (``ratio_coverage``):
  the confidence where the rounds can give it, else less, never "95%" on three rounds.

``recompute`` redoes every step from a run's stored JSON (the per-example bits, the split's
indices, the timing rounds), as a reader would. Torch-free.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from benchmarks.recommend.split import Split, discordant_at
from benchmarks.report import stats
from benchmarks.report.answer import COUNTED_OBJECTIVES, FEW_DISCORDANT, objective_ratio
from benchmarks.report.results import VariantResult

TEST = ("non-inferiority of each candidate against the baseline, paired on the certify "
        "split: H0 theta <= -delta vs H1 theta > -delta; with fewer than "
        f"{stats.EXACT_BELOW} discordant pairs the exact unconditional test (Sidik 2003, Stat "
        "Med 22:265-278, nuisance restricted as Berger and Boos 1994), otherwise Tango's score "
        "test (Tango 1998, Stat Med 17:891-908), each candidate's named in its row; "
        "fixed-sequence over the candidates, slowest first, stopping at the first failure")


@dataclass
class Tested:
    """One candidate of the sequence, before or after its test."""
    order: int
    name: str
    search_ratio: float | None          # its objective ratio in the search phase
    search_change_pts: float | None     # its accuracy change on the search split
    tested: bool = False
    certified: bool = False
    b: int | None = None
    c: int | None = None
    n: int | None = None
    theta_pts: float | None = None
    interval_pts: list[float] | None = None   # two-sided, at the confidence
    lower_pts: float | None = None            # one-sided, at the confidence
    ratio: float | None = None                # the objective ratio where it was last timed
    ratio_ci: list[float] | None = None
    ratio_rounds: int | None = None           # the paired timing rounds it resampled
    ratio_coverage: float | None = None       # its interval's nominal coverage
    timed: str | None = None                  # "final" (timed again with the baseline) or
    notes: list[str] = field(default_factory=list)  # "search" (its search-phase rounds)
    p_value: float | None = None              # the non-inferiority test's, at -margin
    test: str | None = None                   # which test (stats.EXACT_TEST or SCORE_TEST)
    test_why: str | None = None               # and why (stats.exact_rule)


@dataclass
class Certificate:
    margin_pts: float
    margin: str                         # as given: 1pt, 2%
    confidence: float
    objective: str
    split: dict                         # seed, sizes (the indices are in the recommendation)
    candidates: list[Tested] = field(default_factory=list)
    stopped_at: int | None = None       # the order of the first candidate that failed
    winner: str | None = None
    speedup: dict | None = None  # {"ratio", "ci", "faster", "timed", "rounds", "coverage"}
    reason: str = ""
    smallest_margin_pts: float | None = None
    test: str = TEST

    @property
    def certified(self) -> list[Tested]:
        return [t for t in self.candidates if t.certified]

    def to_dict(self) -> dict:
        out = asdict(self)
        out["alpha"] = round(1 - self.confidence, 12)
        out["certified"] = [t.name for t in self.certified]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Certificate":
        known = set(cls.__dataclass_fields__)
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["candidates"] = [Tested(**t) for t in data.get("candidates") or []]
        return cls(**kwargs)


def order_candidates(candidates: list[dict]) -> list[Tested]:
    """The sequence: candidates ({"name", "ratio", "change_pts"} from the search) ordered by
    their search-phase speed, slowest first (ties by name, so the order is a function of the
    search alone)."""
    ranked = sorted(candidates, key=lambda c: (c["ratio"], c["name"]))
    return [Tested(i, c["name"], c["ratio"], c.get("change_pts")) for i, c in enumerate(ranked)]


def judge(tested: Tested, mine: VariantResult, base: VariantResult, split: Split,
             margin_pts: float, confidence: float, test: str | None = None) -> bool:
    """The non-inferiority test of one candidate on the certify split; fills ``tested``.
    The test follows ``stats.exact_rule``: the exact unconditional test where discordant
    pairs are few (its size is guaranteed there, Tango's is not), Tango's score test
    otherwise; its lower limit and its p-value at -margin come from that one test (the limit
    is above -margin exactly when p < alpha), and so does the two-sided interval shown."""
    n = len(split.certify)
    b, c = discordant_at(mine.scores.correct_bits, base.scores.correct_bits, split.n, split.certify)
    forced = test
    test = stats.noninferiority(b, c, n, margin_pts / 100, confidence, forced)
    two_sided = stats.paired_difference(b, c, n, confidence, forced)
    tested.tested = True
    tested.b, tested.c, tested.n = b, c, n
    tested.theta_pts = 100 * (b - c) / n
    tested.interval_pts = two_sided["ci_pts"]
    tested.lower_pts = 100 * test["lower"]
    tested.p_value = test["p_value"]
    tested.test, tested.test_why = test["test"], test["why"]
    tested.certified = bool(test["rejected"])
    if b + c < FEW_DISCORDANT:
        tested.notes.append(f"few discordant pairs ({b + c})")
    return tested.certified


def certify(sequence: list[Tested], results: dict[str, VariantResult], base: VariantResult,
            split: Split, *, margin_pts: float, margin: str, confidence: float,
            objective: str, references: dict[str, VariantResult] | None = None,
            smallest_margin_pts: float | None = None, test: str | None = None
            ) -> Certificate:
    """The fixed-sequence procedure over ``sequence`` (already ordered) with each candidate's
    result: its bits, and its timing rounds beside the baseline's in ``base`` (timed again
    together after the search) or, where ``references`` names one, beside that baseline (the
    one of its own search wave, when the final timing did not happen)."""
    references = references or {}
    cert = Certificate(margin_pts, margin, confidence, objective, split.card(),
                       candidates=sequence, smallest_margin_pts=smallest_margin_pts)
    if not base.scores.correct_bits or base.scores.n_test != split.n:
        cert.reason = "the baseline has no per-example accuracy on this test split"
        return cert
    for tested in sequence:
        mine = results.get(tested.name)
        if mine is None or not mine.ok or mine.scores.n_test != split.n \
                or not mine.scores.correct_bits:
            tested.notes.append("not measured: counts as a failure (the order was fixed)")
            cert.stopped_at = tested.order
            break
        if not judge(tested, mine, base, split, margin_pts, confidence, test):
            cert.stopped_at = tested.order
            break
    for tested in cert.certified:
        mine = results[tested.name]
        reference = references.get(tested.name, base)
        tested.ratio, tested.ratio_ci = objective_ratio(mine, reference, objective)
        if tested.ratio_ci:
            tested.ratio_rounds = min(len(mine.timing.round_p50_ms),
                                      len(reference.timing.round_p50_ms))
            # objective_ratio's bootstrap is at the library's confidence, not the margin's
            tested.ratio_coverage = interval_coverage(tested.ratio_rounds, stats.CONFIDENCE)
        tested.timed = "search" if tested.name in references else "final"
    _choose(cert, results)
    return cert


def _choose(cert: Certificate, results: dict[str, VariantResult]) -> None:
    """The winner among the certified: faster than the baseline beyond its noise first, then
    the fastest (``_fastest``)."""
    good = [t for t in cert.certified if t.ratio is not None]
    if not cert.candidates:
        cert.reason = ("no trial of the search was within the margin on the search split and "
                       "faster than the baseline: nothing to certify")
        return
    if not good:
        cert.reason = none_certified(cert)
        return

    def faster(t: Tested) -> bool:
        return bool(t.ratio_ci[0] > 1) if t.ratio_ci else t.ratio > 1
    best = _fastest([t for t in good if faster(t)] or good, results, cert.objective)
    cert.winner = best.name
    cert.speedup = {"ratio": best.ratio, "ci": best.ratio_ci, "faster": faster(best),
                    "timed": best.timed, "rounds": best.ratio_rounds,
                    "coverage": best.ratio_coverage}
    word = "faster" if cert.objective in ("p50", "p99", "throughput") else "better"
    claim = (f"{best.ratio:.2f}x" + (f" [{best.ratio_ci[0]:.2f}, {best.ratio_ci[1]:.2f}] ("
                                     f"{interval_label(best.ratio_rounds, best.ratio_coverage)})"
                                     if best.ratio_ci else ""))
    cert.reason = (f"{best.name} is within {cert.margin_pts:g} points of the baseline at "
                   f"{cert.confidence:.0%} confidence (lower limit {best.lower_pts:+.2f} "
                   f"points, n={best.n}"
                   + (f", {best.test} test, p={best.p_value:.3g}" if best.test else "")
                   + f") and {claim} {word} in {cert.objective}"
                   + ("" if faster(best) else f", not {word} beyond its noise"))


def none_certified(cert: Certificate) -> str:
    """Why nothing was certified: the sequence's first candidate failed (the order fixed)."""
    first = cert.candidates[0]
    return (f"none certified: the first candidate in the sequence, {first.name}, failed"
            + (f" (its lower limit {first.lower_pts:+.2f} points is not above "
               f"-{cert.margin_pts:g})" if first.lower_pts is not None else "")
            + "; the sequence stops at the first failure")


def interval_coverage(rounds: int, confidence: float) -> float:
    """The nominal coverage of a speed-up interval resampled from ``rounds`` paired rounds:
    the bootstrap's confidence, at most the coverage of the rounds' own range. Any interval
    within the range of n exchangeable rounds covers their median with probability at most
    1 - 2^(1-n) (both ends beyond it: 2 * 0.5^n); three rounds give 75%, five 94%, six 97%."""
    return min(confidence, 1 - 2.0 ** (1 - rounds))


def interval_label(rounds: int | None, coverage: float | None) -> str:
    """"95% interval, 6 paired rounds": what the interval beside a speed-up is."""
    if not rounds or coverage is None:
        return "no interval"
    return f"{100 * coverage:.3g}% interval, {rounds} paired rounds"


def _fastest(pool: list[Tested], results: dict[str, VariantResult], objective: str) -> Tested:
    """The search's fastest of ``pool`` (in the fixed order: the last), displaced only by one
    the final timing shows faster than it beyond noise: the paired ratio of their rounds has
    its interval above 1 (sizes and memory are counted: bigger is enough). Picking the best
    point ratio instead made the same replayed search name either of two candidates as fast
    as each other, depending on the timing noise of the run."""
    best, counted = pool[-1], objective in COUNTED_OBJECTIVES
    for tested in reversed(pool[:-1]):
        if not counted and "search" in (tested.timed, best.timed):
            continue  # timed in different rounds: no paired comparison between them
        ratio, ci = objective_ratio(results[tested.name], results[best.name], objective)
        if ratio is not None and (ratio > 1 if counted else bool(ci) and ci[0] > 1):
            best = tested
    return best


def recompute(document: dict) -> Certificate:
    """The certificate redone from a run's JSON document alone (``RunReport.document()``):
    the order as the certificate states it, each candidate's certify bits against the
    baseline's, the same test and the same stop."""
    rec = document["recommendation"]
    stated = Certificate.from_dict(rec["certificate"])
    split = Split.from_dict(rec["split"])
    variants = {v["name"]: VariantResult.from_dict(v) for v in document["variants"]}
    base = variants[document["baseline"]]
    sequence = [Tested(t.order, t.name, t.search_ratio, t.search_change_pts)
                for t in stated.candidates]
    # A candidate timed only in the search: its ratio is against its own wave's baseline.
    references = {name: VariantResult.from_dict(ref) for name, ref in
                  (rec.get("references") or {}).items()}
    # A certificate stored before the exact test names no test in its rows: it used Tango's,
    # and is redone with it.
    legacy = any(t.tested for t in stated.candidates) and \
        not any(t.test for t in stated.candidates)
    again = certify(sequence, variants, base, split, margin_pts=stated.margin_pts,
                    margin=stated.margin, confidence=stated.confidence,
                    objective=stated.objective, references=references,
                    smallest_margin_pts=stated.smallest_margin_pts,
                    test=stats.SCORE_TEST if legacy else None)
    if legacy:  # as it was stored: no test named, its test string and p-values absent
        again.test = stated.test
        for t in again.candidates:
            t.test = t.test_why = t.p_value = None
        _choose(again, variants)  # its reason, as it was worded without a named test
    return again
