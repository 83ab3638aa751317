"""The certificate: which of the search's candidates is provably within delta of the baseline
(and within every other risk asked for), and how much faster it is.

- **Only faster candidates.** A front member enters only when its search-phase speed-up is
  above ``min_speedup`` beyond noise (the lower end of its interval over the search's timing
  rounds); the others are listed in ``not_faster`` and spend no test (a 1.06x candidate
  within noise of the baseline had opened the sequence and ended it).
- **An order from the data, fixed first** (Pareto Testing, Laufer-Goldshtein et al., ICLR
  2023): each candidate's p-value at the margin on the *search* split, the same paired test
  as the certificate's (the largest over its example risks), most likely to pass first;
  p-values equal to one significant digit (the exact test's own precision, about a tenth)
  are ties, broken by speed, fastest first (``order_by_search``). Fixed before a single certify bit is read,
  and recorded with its basis (``order_basis``, each row's ``search_p``).
- **One test per candidate, every risk at once.** On the certify split, paired on the same
  examples: b = #(candidate right, baseline wrong), c = #(candidate wrong, baseline right),
  n = |certify|, theta = (b - c) / n; H0 theta <= -delta against H1 theta > -delta
  (``stats.noninferiority``: the exact unconditional test where b + c is below
  ``stats.EXACT_BELOW``, Tango's score test from there on; each row names its test), and
  each further risk's test (``risks``); a candidate passes when all of them reject at its
  level (the largest p-value is its p-value).
- **A procedure that survives a failure** (``procedures``): a graphical procedure over the
  candidates in their order keeps the family-wise error at alpha = 1 - confidence; the one
  the certificate names (``procedure``) was chosen by simulated power. A certificate stored
  before the fifth wave reads as fixed-sequence over a speed order, and is recomputed so.
- **The speed claim.** Among the certified (those faster than the baseline beyond noise, where
  any is), the winner is the search's fastest, unless the final timing shows another faster
  than it beyond noise (``_fastest``): two equally fast candidates do not swap places with the
  timing noise of a rerun. Its ratio to the baseline is the median of the paired timing
  rounds' ratios, with a bootstrap interval of that median (``answer.objective_ratio``);
  "faster" only when the interval's lower end is above 1. The interval is stated with its
  paired rounds and its nominal coverage (``ratio_coverage``): the confidence where the rounds
  can give it, else less, never "95%" on three rounds.

``recompute`` redoes every step from a run's stored JSON (the per-example bits and classes,
the split's indices, the timing rounds and samples), as a reader would. Torch-free.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

from benchmarks.recommend import procedures
from benchmarks.recommend.risks import Risk, RiskTest, image_tests
from benchmarks.recommend.sequence import search_p
from benchmarks.recommend.split import Split
from benchmarks.report import stats
from benchmarks.report.answer import (
    COUNTED_OBJECTIVES,
    POOLED,
    objective_ratio,
)
from benchmarks.report.results import VariantResult

TEST = ("non-inferiority of each candidate against the baseline, paired on the certify "
        "split: H0 theta <= -delta vs H1 theta > -delta; with fewer than "
        f"{stats.EXACT_BELOW} discordant pairs the exact unconditional test (Sidik 2003, Stat "
        "Med 22:265-278, nuisance restricted as Berger and Boos 1994), otherwise Tango's score "
        "test (Tango 1998, Stat Med 17:891-908), each candidate's named in its row; "
        "fixed-sequence over the candidates, slowest first, stopping at the first failure")
# What the certificates of the fifth wave say of their test (the procedure is named apart).
TEST_BY_ORDER = (
    "non-inferiority of each candidate against the baseline, paired on the certify split: H0 "
    "theta <= -delta vs H1 theta > -delta; with fewer than "
    f"{stats.EXACT_BELOW} images where they differ an exact test (Sidik 2003, nuisance "
    "restricted as Berger and Boos 1994), otherwise Tango's score test (Tango 1998); each "
    "further risk by its own test, a candidate passing when every one does")
SPEED_ORDER = "speed"
SEARCH_ORDER = "search p-value at the margin"
# p-values equal to this many significant digits tie in the order, the faster first: the
# exact test's p-value is known to about a tenth of itself, and every clearly lossless
# candidate sits at its floor (Berger-Boos' gamma, 1e-4) give or take that.
ORDER_DIGITS = 1


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
    lower_pts: float | None = None            # one-sided, at 1 - its level
    ratio: float | None = None                # the objective ratio where it was last timed
    ratio_ci: list[float] | None = None
    ratio_rounds: int | None = None           # the paired timing rounds it resampled
    ratio_coverage: float | None = None       # its interval's nominal coverage
    timed: str | None = None                  # "final" (timed again with the baseline) or
    notes: list[str] = field(default_factory=list)  # "search" (its search-phase rounds)
    p_value: float | None = None              # the largest of its risks' p-values
    test: str | None = None                   # which test (stats.EXACT_TEST or SCORE_TEST)
    test_why: str | None = None               # and why (stats.exact_rule)
    # The fifth wave's: where it runs, its search interval, the order's basis, the share of
    # alpha it was last tested at, and each risk's test beyond the accuracy margin.
    runtime: str | None = None
    search_ratio_ci: list[float] | None = None
    search_p: float | None = None
    level: float | None = None
    risks: dict = field(default_factory=dict)


@dataclass
class Certificate:
    margin_pts: float
    margin: str                         # as given: 1pt, 2%
    confidence: float
    objective: str
    split: dict                         # seed, sizes (the indices are in the recommendation)
    candidates: list[Tested] = field(default_factory=list)
    stopped_at: int | None = None       # fixed-sequence: the order of the first that failed
    winner: str | None = None
    speedup: dict | None = None  # {"ratio", "ci", "faster", "timed", "rounds", "coverage"}
    reason: str = ""
    smallest_margin_pts: float | None = None
    test: str = TEST
    # The fifth wave's; their defaults are how a certificate stored before it reads.
    procedure: str = "fixed-sequence"
    order_basis: str = SPEED_ORDER
    risks: list[dict] = field(default_factory=list)
    not_faster: list[dict] = field(default_factory=list)
    min_speedup: float | None = None
    speedup_statistic: str = POOLED
    # Where its speed was measured ("cpu (AMD EPYC ...)", "cuda:0 (NVIDIA H100 ...)"): a
    # speed-up holds on that device kind, not another (set by the pipeline; None before).
    device: str | None = None

    @property
    def certified(self) -> list[Tested]:
        return [t for t in self.candidates if t.certified]

    @property
    def extra_risks(self) -> tuple[Risk, ...]:
        """The risks beyond the accuracy margin, as requested."""
        return tuple(Risk.from_dict(r) for r in self.risks if r.get("name") != "accuracy")

    def to_dict(self) -> dict:
        out = asdict(self)
        out["alpha"] = round(1 - self.confidence, 12)
        out["certified"] = [t.name for t in self.certified]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Certificate":
        known = set(cls.__dataclass_fields__)
        kwargs = {k: v for k, v in data.items() if k in known}
        rows = set(Tested.__dataclass_fields__)
        kwargs["candidates"] = [Tested(**{k: v for k, v in t.items() if k in rows})
                                for t in data.get("candidates") or []]
        return cls(**kwargs)


def risk_list(margin_pts: float, extra: tuple[Risk, ...] = ()) -> list[dict]:
    """The certificate's ``risks``: the accuracy margin first, then the others asked for."""
    return [{"name": "accuracy", "margin_pts": margin_pts}] + [r.to_dict() for r in extra]


def order_candidates(candidates: list[dict]) -> list[Tested]:
    """The sequence before the fifth wave: candidates ({"name", "ratio", "change_pts"} from
    the search) ordered by their search-phase speed, slowest first (ties by name). A stored
    certificate of that order is recomputed with it."""
    ranked = sorted(candidates, key=lambda c: (c["ratio"], c["name"]))
    return [Tested(i, c["name"], c["ratio"], c.get("change_pts")) for i, c in enumerate(ranked)]


def order_by_search(candidates: list[dict]) -> list[Tested]:
    """The sequence: candidates ({"name", "ratio", "search_p", ...}) most likely to pass
    first, by their p-value at the margin on the search split; p-values equal to
    ``ORDER_DIGITS`` significant digits are ties, the faster first, then by name. A function
    of the search alone."""
    def key(c):
        p = c.get("search_p")
        return (1.0 if p is None else float(f"{p:.{ORDER_DIGITS}g}"), -(c["ratio"] or 0),
                c["name"])
    ranked = sorted(candidates, key=key)
    return [Tested(i, c["name"], c["ratio"], c.get("change_pts"), runtime=c.get("runtime"),
                   search_ratio_ci=c.get("ratio_ci"), search_p=c.get("search_p"))
            for i, c in enumerate(ranked)]


# -- the procedure -----------------------------------------------------------------------------

def decide(cert: Certificate, tests: dict[str, list[RiskTest] | None]) -> None:
    """The procedure over ``cert.candidates`` (in their order), each with its risks' tests
    (None: not measured, it cannot pass); fills every row tested and where a fixed sequence
    stopped."""
    alpha = 1 - cert.confidence

    def rejects(name: str) -> Callable[[float], bool]:
        found = tests.get(name)
        if not found:
            return lambda level: False
        return lambda level: all(t.rejects(level) for t in found)
    rejected, levels = procedures.certify_with(
        cert.procedure, [rejects(t.name) for t in cert.candidates], alpha)
    for tested, passed, level in zip(cert.candidates, rejected, levels):
        found = tests.get(tested.name)
        if level <= 0:  # never held a share of alpha: a fixed sequence's after its stop
            continue
        tested.level = level
        if not found:
            tested.notes.append("not measured: it cannot pass (the order was fixed)")
            if cert.procedure == "fixed-sequence":
                tested.notes[-1] = "not measured: counts as a failure (the order was fixed)"
            continue
        _fill(tested, found, level, cert.confidence)
        tested.tested, tested.certified = True, bool(passed)
    if cert.procedure == "fixed-sequence":
        cert.stopped_at = next((t.order for t in cert.candidates
                                if t.level and not t.certified), None)


def _fill(tested: Tested, found: list[RiskTest], level: float, confidence: float) -> None:
    """A tested row's figures: the accuracy test's in its own fields (``fill``), the other
    risks' in ``risks``; its p-value the largest."""
    ps = []
    for test in found:
        figures = test.figures(level)
        ps.append(figures["p"])
        if test.name == "accuracy":
            test.fill(tested, figures, confidence)
        else:
            tested.risks[test.name] = figures
    tested.p_value = max(ps)


def judge(tested: Tested, mine: VariantResult, base: VariantResult, split: Split,
          margin_pts: float, confidence: float, test: str | None = None) -> bool:
    """The non-inferiority test of one candidate on the certify split at alpha = 1 -
    ``confidence``; fills ``tested``. The test follows ``stats.exact_rule``: the exact
    unconditional test where discordant pairs are few (its size is guaranteed there, Tango's
    is not), Tango's score test otherwise; its lower limit and its p-value at -margin come from
    that one test (the limit is above -margin exactly when p < alpha), and so does the
    two-sided interval shown."""
    found, _ = image_tests(mine, base, split, split.certify, margin_pts, (), test)
    level = 1 - confidence
    _fill(tested, found, level, confidence)
    tested.tested, tested.level = True, level
    tested.certified = found[0].rejects(level)
    return tested.certified


def certify(sequence: list[Tested], results: dict[str, VariantResult], base: VariantResult,
            split: Split, *, margin_pts: float, margin: str, confidence: float,
            objective: str, references: dict[str, VariantResult] | None = None,
            smallest_margin_pts: float | None = None, test: str | None = None,
            procedure: str = "fixed-sequence", order_basis: str = SPEED_ORDER,
            extra: tuple[Risk, ...] = (), not_faster: list[dict] | None = None,
            min_speedup: float | None = None, statistic: str = POOLED) -> Certificate:
    """``procedure`` over ``sequence`` (already ordered) with each candidate's result: its
    bits (and classes), and its timing rounds beside the baseline's in ``base`` (timed again
    together after the search) or, where ``references`` names one, beside that baseline (the
    one of its own search wave, when the final timing did not happen). The defaults are the
    certificate before the fifth wave's (a stored one is recomputed with them)."""
    references = references or {}
    cert = Certificate(margin_pts, margin, confidence, objective, split.card(),
                       candidates=sequence, smallest_margin_pts=smallest_margin_pts,
                       test=TEST if procedure == "fixed-sequence" and order_basis ==
                       SPEED_ORDER else TEST_BY_ORDER, procedure=procedure,
                       order_basis=order_basis, risks=risk_list(margin_pts, extra),
                       not_faster=list(not_faster or []), min_speedup=min_speedup,
                       speedup_statistic=statistic)
    if not base.scores.correct_bits or base.scores.n_test != split.n:
        cert.reason = "the baseline has no per-example accuracy on this test split"
        return cert
    tests: dict[str, list[RiskTest] | None] = {}
    for tested in sequence:
        mine = results.get(tested.name)
        if mine is None or not mine.ok or mine.scores.n_test != split.n \
                or not mine.scores.correct_bits:
            tests[tested.name] = None
            continue
        found, notes = image_tests(mine, base, split, split.certify, margin_pts, extra, test,
                                   timed=tested.name not in references)
        tests[tested.name] = found
        tested.notes.extend(notes)
    decide(cert, tests)
    for tested in cert.certified:
        mine = results[tested.name]
        reference = references.get(tested.name, base)
        tested.ratio, tested.ratio_ci = objective_ratio(mine, reference, objective, statistic)
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
        cert.reason = nothing_to_certify(cert)
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
    also = "".join(f", {Risk.from_dict(r).words()}" for r in cert.risks
                   if r.get("name") != "accuracy")
    # In a reader's words; a certificate stored before the fifth wave (no risks) as it was.
    test = (stats.TEST_WORDS.get(best.test, best.test) if cert.risks else f"{best.test} test")
    cert.reason = (f"{best.name} is within {cert.margin_pts:g} points of the baseline"
                   + also + f" at {cert.confidence:.0%} confidence (lower limit "
                   f"{best.lower_pts:+.2f} points, n={best.n}"
                   + (f", {test}, p={best.p_value:.3g}" if best.test else "")
                   + f") and {claim} {word} in {cert.objective}"
                   + ("" if faster(best) else f", not {word} beyond its noise"))


def nothing_to_certify(cert: Certificate) -> str:
    """Why the sequence is empty: nothing within the margin and faster in the search."""
    if cert.not_faster:
        names = ", ".join(t["name"] for t in cert.not_faster[:3])
        return (f"no candidate was faster than {cert.min_speedup or 1:g}x beyond its noise in "
                f"the search ({names}{', ...' if len(cert.not_faster) > 3 else ''} within "
                f"the margin but not faster): nothing to certify")
    return ("no trial of the search was within the margin on the search split and faster "
            "than the baseline: nothing to certify")


def none_certified(cert: Certificate) -> str:
    """Why nothing was certified, in one sentence: the fixed sequence's first failure, or the
    candidate closest to passing and what it missed by."""
    if cert.procedure == "fixed-sequence" and cert.order_basis == SPEED_ORDER:
        first = cert.candidates[0]
        return (f"none certified: the first candidate in the sequence, {first.name}, failed"
                + (f" (its lower limit {first.lower_pts:+.2f} points is not above "
                   f"-{cert.margin_pts:g})" if first.lower_pts is not None else "")
                + "; the sequence stops at the first failure")
    tested = [t for t in cert.candidates if t.tested]
    if not tested:
        return "none certified: no candidate could be tested (none was measured whole)"
    closest = min(tested, key=lambda t: (t.p_value if t.p_value is not None else 1.0,
                                         t.order))
    missed = []
    if closest.lower_pts is not None and closest.lower_pts <= -cert.margin_pts:
        missed.append(f"its accuracy's worst case {closest.lower_pts:+.2f} points is not "
                      f"above -{cert.margin_pts:g}")
    for name, figures in closest.risks.items():
        if figures.get("missing"):
            missed.append(f"its {name} could not be tested")
        elif figures.get("p", 1) >= (closest.level or 0):
            missed.append(f"its {name} test gave p={figures['p']:.3g}")
    return (f"none certified: {len(tested)} candidate{'s' if len(tested) != 1 else ''} "
            f"tested, the closest, {closest.name}, "
            + ("; ".join(missed) or f"had p={closest.p_value:.3g}")
            + f" (at its share of alpha, {closest.level:.3g})")


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
    """The search's fastest of ``pool``, displaced only by one the final timing shows faster
    than it beyond noise: the paired ratio of their rounds has its interval above 1 (sizes
    and memory are counted: bigger is enough). Picking the best point ratio instead made the
    same replayed search name either of two candidates as fast as each other, depending on
    the timing noise of the run."""
    pool = sorted(pool, key=lambda t: (t.search_ratio or 0, t.name))
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
    the order from the search split's bits (or, for a certificate of the speed order, as it
    states it), each candidate's certify bits, classes and final timing against the
    baseline's, the same procedure and the same choice."""
    rec = document["recommendation"]
    stated = Certificate.from_dict(rec["certificate"])
    split = Split.from_dict(rec["split"])
    variants = {v["name"]: VariantResult.from_dict(v) for v in document["variants"]}
    base = variants[document["baseline"]]
    extra = stated.extra_risks
    if stated.order_basis == SEARCH_ORDER:
        found = [{"name": t.name, "ratio": t.search_ratio, "change_pts": t.search_change_pts,
                  "runtime": t.runtime, "ratio_ci": t.search_ratio_ci,
                  "search_p": search_p(variants[t.name], base, split, stated.margin_pts,
                                       extra) if t.name in variants else None}
                 for t in stated.candidates]
        sequence = order_by_search(found)
    else:
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
                    test=stats.SCORE_TEST if legacy else None, procedure=stated.procedure,
                    order_basis=stated.order_basis, extra=extra,
                    not_faster=stated.not_faster, min_speedup=stated.min_speedup,
                    statistic=stated.speedup_statistic)
    again.device = stated.device  # where it was measured: a fact of the run, not recomputed
    if not stated.risks:  # stored before the fifth wave: its rows as they were
        again.risks = []
        for t in again.candidates:
            t.level = None
    if legacy:  # as it was stored: no test named, its test string and p-values absent
        again.test = stated.test
        for t in again.candidates:
            t.test = t.test_why = t.p_value = None
        _choose(again, variants)  # its reason, as it was worded without a named test
    return again
