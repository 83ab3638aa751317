"""A language model's certificate: which cell (variant x runtime mode) is provably within
delta points of the baseline's next-token accuracy, and how much faster it is.

The image certificate's method (``certificate``) with the unit a language model's outcomes
come in: the *window*. Tokens within a window are not independent (a wrong token changes the
context of the next), so a window is one paired observation, as in the bootstrap of
``benchmarks.measure.lm_quality``:

- **The effect.** On the certify windows, delta_hat = sum(correct_variant - correct_baseline)
  / sum(scored tokens): the change in token-weighted next-token accuracy, in points.
- **The test.** A ratio of sums over windows as clusters: its standard error from the
  residuals a_i - delta_hat * t_i (n / (n - 1) times their sum of squares, over the tokens
  squared), and Student's t with n - 1 degrees of freedom. H0 delta <= -margin against
  H1 delta > -margin, rejected when p < alpha, which is when the one-sided lower limit is above
  -margin. It rests on the mean of n windows being near normal: with fewer than
  ``FEW_WINDOWS`` the row says so. A cell whose every certify window scores exactly as the
  baseline's (the baseline compiled, say) has no spread: delta_hat is 0 and it passes.
- **The order and the procedure** as for images: candidates most likely to pass first, by
  the same test on the search windows, before a certify window is read; the graphical
  procedure over them (``procedures``), whose family-wise error stays at alpha. A certificate
  stored before the fifth wave (slowest first, fixed-sequence) is recomputed so.
- **The NLL risk** (``--also nll<=X``): the mean NLL increase per token, a ratio of sums over
  windows as the accuracy change is; H0 increase >= X against H1 below it, the same t over
  windows; a cell passes when both tests do.
- **The speed claim.** Each certified cell's ratio to the baseline run as it was loaded
  (eager fp32), the objective's medians over the interleaved timing rounds with a bootstrap
  interval that resamples whole rounds (``stats.bootstrap_ratio``); "faster" only when that
  interval's lower end is above 1. The winner is the last certified in the order (the
  search's fastest) among those faster beyond noise. Search and speed claim read the same
  timing rounds; the order depends on no certify window, which is what the test needs.

``recompute`` redoes it from a run's JSON document alone (the per-window outcomes, the
split's indices, the timing samples). Torch-free.
"""

from __future__ import annotations

import math

from benchmarks.recommend.certificate import (
    SEARCH_ORDER,
    SPEED_ORDER,
    Certificate,
    Tested,
    decide,
    interval_coverage,
    interval_label,
    none_certified,
    order_by_search,
    risk_list,
)
from benchmarks.recommend.risks import Never, Risk, RiskTest
from benchmarks.recommend.split import Split
from benchmarks.report import stats

WINDOW_TEST = "paired t over windows"
LM_TEST_BY_ORDER = (
    "non-inferiority of each cell's next-token accuracy against the baseline's, paired on the "
    "certify windows: H0 delta <= -margin vs H1 delta > -margin; the change in token-weighted "
    "accuracy as a ratio of sums over windows (windows as clusters), Student's t with n - 1 "
    "degrees of freedom; each further risk by its own test over the same windows")
LM_TEST = ("non-inferiority of each cell's next-token accuracy against the baseline's, paired "
           "on the certify windows: H0 delta <= -margin vs H1 delta > -margin; the change in "
           "token-weighted accuracy as a ratio of sums over windows (windows as clusters: "
           "tokens within one are not independent), its standard error from the windows' "
           "residuals, Student's t with n - 1 degrees of freedom; fixed-sequence over the "
           "candidates, slowest first, stopping at the first failure")
# Below this many certify windows the t distribution of their mean is an assumption worth
# naming in the row (the windows' differences are bounded, so it holds well from about here).
FEW_WINDOWS = 20
# What "fastest" reads of a cell, per objective: a latency (lower is better, a ratio
# reference / cell) or a count (lower is better too, no timing rounds).
LM_OBJECTIVES = {"p50": "decode_ms", "throughput": "decode_ms", "size": "weights_bytes",
                 "memory": "peak_bytes"}
COUNTED = ("size", "memory")
OBJECTIVE_WORDS = {"p50": "decode ms per token", "throughput": "tokens per second",
                   "size": "weights' stored bytes", "memory": "peak memory of a generation"}


def check_objective(objective: str) -> None:
    if objective not in LM_OBJECTIVES:
        raise ValueError(f"a language model's recommend takes --objective "
                         f"{'|'.join(LM_OBJECTIVES)} (p50 and throughput: decode per token); "
                         f"got {objective!r}")


def window_test(variant_correct, base_correct, tokens, margin_pts: float,
                confidence: float) -> dict:
    """The non-inferiority test of one cell on ``n`` windows (lists of per-window counts):
    {"theta_pts", "lower_pts", "interval_pts", "p_value", "rejected", "b", "c", "n", "test",
    "why"}; b and c are the windows on which the variant is right more often, and less."""
    from scipy.stats import t as student
    a = [v - b for v, b in zip(variant_correct, base_correct)]
    n, total = len(a), float(sum(tokens))
    if n < 2 or total <= 0:
        raise ValueError(f"{n} certify window(s): a paired test over windows needs two or more")
    theta = sum(a) / total
    residuals = [x - theta * t for x, t in zip(a, tokens)]
    se = math.sqrt(n / (n - 1) * sum(r * r for r in residuals)) / total
    df, alpha = n - 1, 1 - confidence
    margin = margin_pts / 100
    if se == 0:  # every window scored alike: the change is exactly theta
        lower, two = theta, [theta, theta]
        p = 0.0 if theta > -margin else 1.0
    else:
        lower = theta - student.ppf(confidence, df) * se
        half = student.ppf(1 - alpha / 2, df) * se
        two = [theta - half, theta + half]
        p = float(student.sf((theta + margin) / se, df))
    return {"theta_pts": 100 * theta, "lower_pts": 100 * lower,
            "interval_pts": [100 * two[0], 100 * two[1]], "p_value": p,
            "rejected": bool(lower > -margin), "b": sum(1 for x in a if x > 0),
            "c": sum(1 for x in a if x < 0), "n": n, "se_pts": 100 * se, "test": WINDOW_TEST,
            "why": f"{n} certify windows, {int(total)} scored tokens; windows as clusters"}


def _ratio_t(a, tokens, null: float, confidence: float, lower_side: bool) -> dict:
    """A ratio of sums over windows, sum(a) / sum(tokens), against ``null`` with Student's t
    over the windows as clusters: {"estimate", "p", "limit", "se"} where p is of H0 estimate
    <= null (``lower_side``: H1 above it, the limit a lower one) or of H0 estimate >= null
    (H1 below it, the limit an upper one)."""
    from scipy.stats import t as student
    n, total = len(a), float(sum(tokens))
    theta = sum(a) / total
    residuals = [x - theta * t for x, t in zip(a, tokens)]
    se = math.sqrt(n / (n - 1) * sum(r * r for r in residuals)) / total
    if se == 0:
        passed = theta > null if lower_side else theta < null
        return {"estimate": theta, "p": 0.0 if passed else 1.0, "limit": theta, "se": 0.0}
    step = float(student.ppf(confidence, n - 1)) * se
    z = (theta - null) / se if lower_side else (null - theta) / se
    return {"estimate": theta, "p": float(student.sf(z, n - 1)),
            "limit": theta - step if lower_side else theta + step, "se": se}


class WindowAccuracy(RiskTest):
    """The margin's test of a cell's next-token accuracy over certify (or search) windows."""
    name = "accuracy"

    def __init__(self, variant_correct, base_correct, tokens, margin_pts: float):
        self.args = (list(variant_correct), list(base_correct), list(tokens), margin_pts)
        self.p = window_test(*self.args, 0.95)["p_value"]

    def rejects(self, level: float) -> bool:
        return self.p < level

    def figures(self, level: float) -> dict:
        found = window_test(*self.args, 1 - level)
        return {**found, "p": found["p_value"]}

    def fill(self, tested: Tested, figures: dict, confidence: float) -> None:
        two = window_test(*self.args, confidence)
        tested.b, tested.c, tested.n = figures["b"], figures["c"], figures["n"]
        tested.theta_pts, tested.interval_pts = figures["theta_pts"], two["interval_pts"]
        tested.lower_pts = figures["lower_pts"]
        tested.test, tested.test_why = figures["test"], figures["why"]
        if figures["n"] < FEW_WINDOWS:
            tested.notes.append(f"few certify windows ({figures['n']}): the t distribution is "
                                f"an approximation")


class WindowNLL(RiskTest):
    """H0 the mean NLL increase per token is at least ``at_most``, over windows."""
    name = "nll"

    def __init__(self, variant_nll, base_nll, tokens, at_most: float):
        self.a = [v - b for v, b in zip(variant_nll, base_nll)]
        self.tokens, self.at_most = list(tokens), at_most
        self.p = _ratio_t(self.a, self.tokens, at_most, 0.95, lower_side=False)["p"]

    def rejects(self, level: float) -> bool:
        return self.p < level

    def figures(self, level: float) -> dict:
        found = _ratio_t(self.a, self.tokens, self.at_most, 1 - level, lower_side=False)
        return {"p": found["p"], "estimate": found["estimate"], "upper": found["limit"],
                "at_most": self.at_most}


def window_tests(mine: dict, base: dict, windows, margin_pts: float,
                 extra: tuple[Risk, ...]) -> tuple[list[RiskTest], list[str]]:
    """(a cell's tests on ``windows``: the accuracy margin, then each extra risk; notes on what
    could not be tested) from two outcome records (``WindowOutcomes.to_dict``)."""
    tokens = [base["tokens"][i] for i in windows]
    tests: list[RiskTest] = [WindowAccuracy([mine["correct"][i] for i in windows],
                                            [base["correct"][i] for i in windows], tokens,
                                            margin_pts)]
    notes = []
    for risk in extra:
        if risk.name == "nll" and mine.get("nll") and base.get("nll"):
            tests.append(WindowNLL([mine["nll"][i] for i in windows],
                                   [base["nll"][i] for i in windows], tokens, risk.at_most))
        else:
            notes.append(f"{risk.name}: not testable on a language model's windows")
            tests.append(Never(risk.name))
    return tests, notes


def window_search_p(mine: dict, base: dict, split: Split, margin_pts: float,
                    extra: tuple[Risk, ...] = ()) -> float | None:
    """The order's basis for a cell: the largest p-value of its tests on the search
    windows."""
    if len(split.search) < 2:
        return None
    tests, _ = window_tests(mine, base, split.search, margin_pts, extra)
    return max(t.figures(0.05)["p"] for t in tests)


def change_pts(variant: dict, base: dict, windows) -> float:
    """The token-weighted accuracy change on ``windows`` (positions in the evaluation
    windows), in points, from two outcome records (``WindowOutcomes.to_dict``)."""
    gained = sum(variant["correct"][i] - base["correct"][i] for i in windows)
    tokens = sum(base["tokens"][i] for i in windows)
    return 100 * gained / tokens if tokens else 0.0


def accuracy_on(outcomes: dict, windows) -> float:
    tokens = sum(outcomes["tokens"][i] for i in windows)
    return sum(outcomes["correct"][i] for i in windows) / tokens if tokens else 0.0


def cell_ratio(cell: dict, base_cell: dict, record: dict, base_record: dict,
               objective: str) -> tuple[float | None, list[float] | None, int | None]:
    """(the objective's ratio of the baseline's cell to this one: above 1 is better, its
    interval, the paired rounds resampled)."""
    what = LM_OBJECTIVES[objective]
    if objective in COUNTED:
        if what == "weights_bytes":
            mine, ref = (record.get("size") or {}).get(what), \
                (base_record.get("size") or {}).get(what)
        else:
            mine, ref = cell.get(what), base_cell.get(what)
        return (ref / mine, None, None) if mine and ref else (None, None, None)
    ref_rounds = [[x] for x in (base_cell.get("samples") or {}).get(what) or []]
    my_rounds = [[x] for x in (cell.get("samples") or {}).get(what) or []]
    found = stats.bootstrap_ratio(ref_rounds, my_rounds)
    if found is None:
        return None, None, None
    return found["ratio"], found["ci"], found["rounds"]


def cells_of(records: list[dict]) -> dict[str, tuple[dict, dict]]:
    """{"variant@mode": (its variant's record, its cell)} for every working cell."""
    out = {}
    for record in records:
        if not record.get("ok") or not record.get("outcomes"):
            continue
        for cell in record.get("cells") or []:
            if cell.get("ok"):
                out[f"{record['name']}@{cell['mode']}"] = (record, cell)
    return out


def certify_lm(sequence: list[Tested], records: list[dict], split: Split, *,
               margin_pts: float, margin: str, confidence: float, objective: str,
               reference: str, procedure: str = "fixed-sequence",
               order_basis: str = SPEED_ORDER, extra: tuple[Risk, ...] = (),
               not_faster: list[dict] | None = None, min_speedup: float | None = None
               ) -> Certificate:
    """``procedure`` over ``sequence`` (ordered), each candidate a cell of ``records`` (LM
    variant records: per-window outcomes over the evaluation windows, paired with the
    baseline's), against ``reference`` (the baseline's cell, "baseline@eager"). The defaults
    are the certificate before the fifth wave's (a stored one is recomputed with them)."""
    cells = cells_of(records)
    fifth = not (procedure == "fixed-sequence" and order_basis == SPEED_ORDER)
    cert = Certificate(margin_pts, margin, confidence, objective, split.card(),
                       candidates=sequence, test=LM_TEST if not fifth else LM_TEST_BY_ORDER,
                       procedure=procedure, order_basis=order_basis,
                       risks=risk_list(margin_pts, extra) if fifth else [],
                       not_faster=list(not_faster or []), min_speedup=min_speedup)
    if reference not in cells:
        cert.reason = f"the baseline's cell {reference} was not measured"
        return cert
    for tested in sequence:  # quality is scored once per variant, in eager mode
        if not tested.name.endswith("@eager"):
            tested.notes.append("quality scored eagerly, shared by its compiled cell")
    base_record, base_cell = cells[reference]
    base = base_record["outcomes"]["baseline"]
    if len(base["correct"]) != split.n:
        cert.reason = "the baseline has no per-window outcomes on this split"
        return cert
    tests: dict[str, list[RiskTest] | None] = {}
    for tested in sequence:
        found = cells.get(tested.name)
        if found is None:
            tests[tested.name] = None
            continue
        mine = found[0]["outcomes"]["variant"]
        tests[tested.name], notes = window_tests(mine, base, split.certify, margin_pts, extra)
        tested.notes.extend(notes)
    decide(cert, tests)
    for tested in cert.certified:
        record, cell = cells[tested.name]
        tested.ratio, tested.ratio_ci, tested.ratio_rounds = cell_ratio(
            cell, base_cell, record, base_record, objective)
        if tested.ratio_ci:
            tested.ratio_coverage = interval_coverage(tested.ratio_rounds, stats.CONFIDENCE)
        tested.timed = "final"
    _choose(cert)
    return cert


def _choose(cert: Certificate) -> None:
    good = [t for t in cert.certified if t.ratio is not None]
    if not cert.candidates:
        cert.reason = ("no cell was within the margin on the search windows and better than "
                       "the baseline in " + OBJECTIVE_WORDS[cert.objective]
                       + ": nothing to certify")
        return
    if not good:
        cert.reason = none_certified(cert)
        return

    def better(t: Tested) -> bool:
        return bool(t.ratio_ci[0] > 1) if t.ratio_ci else t.ratio > 1
    pool = [t for t in good if better(t)] or good
    best = max(pool, key=lambda t: (t.search_ratio or 0, t.name))  # the search's fastest
    cert.winner = best.name
    cert.speedup = {"ratio": best.ratio, "ci": best.ratio_ci, "faster": better(best),
                    "timed": best.timed, "rounds": best.ratio_rounds,
                    "coverage": best.ratio_coverage}
    claim = f"{best.ratio:.2f}x" + (
        f" [{best.ratio_ci[0]:.2f}, {best.ratio_ci[1]:.2f}] "
        f"({interval_label(best.ratio_rounds, best.ratio_coverage)})" if best.ratio_ci else "")
    also = "".join(f", {Risk.from_dict(r).words()}" for r in cert.risks
                   if r.get("name") != "accuracy")
    cert.reason = (f"{best.name} is within {cert.margin_pts:g} points of the baseline's "
                   f"next-token accuracy{also} at {cert.confidence:.0%} confidence (lower limit "
                   f"{best.lower_pts:+.2f} points over n={best.n} windows, {best.test}, "
                   f"p={best.p_value:.3g}) and {claim} better in "
                   f"{OBJECTIVE_WORDS[cert.objective]}"
                   + ("" if better(best) else ", not better beyond its noise"))


def recompute(document: dict) -> Certificate:
    """The certificate redone from a language model's recommendation document alone: the
    stated order, each candidate's test on the certify windows' stored outcomes, the ratios
    from the stored timing samples."""
    rec = document["recommendation"]
    stated = Certificate.from_dict(rec["certificate"])
    split = Split.from_dict(rec["split"])
    extra = stated.extra_risks
    if stated.order_basis == SEARCH_ORDER:
        sequence = order_by_search(candidates_of(
            [{"name": t.name, "ratio": t.search_ratio, "ratio_ci": t.search_ratio_ci,
              "search_change_pts": t.search_change_pts, "runtime": t.runtime}
             for t in stated.candidates], document["variants"], split, stated.margin_pts,
            rec["reference"], extra))
    else:
        sequence = [Tested(t.order, t.name, t.search_ratio, t.search_change_pts)
                    for t in stated.candidates]
    again = certify_lm(sequence, document["variants"], split, margin_pts=stated.margin_pts,
                       margin=stated.margin, confidence=stated.confidence,
                       objective=stated.objective, reference=rec["reference"],
                       procedure=stated.procedure, order_basis=stated.order_basis,
                       extra=extra, not_faster=stated.not_faster,
                       min_speedup=stated.min_speedup)
    again.device = stated.device  # where it was measured: a fact of the run, not recomputed
    if not stated.risks:  # stored before the fifth wave: its rows as they were
        for t in again.candidates:
            t.level = None
    return again


def candidates_of(trials: list[dict], records: list[dict], split: Split, margin_pts: float,
                  reference: str, extra: tuple[Risk, ...] = ()) -> list[dict]:
    """The sequence's entries of ``trials`` (cells: {"name", "ratio", "ratio_ci",
    "search_change_pts", "runtime"}), each with its p-value on the search windows: what
    ``certificate.order_by_search`` orders."""
    cells = cells_of(records)
    base = cells[reference][0]["outcomes"]["baseline"]
    return [{"name": t["name"], "ratio": t["ratio"], "ratio_ci": t.get("ratio_ci"),
             "change_pts": t.get("search_change_pts"), "runtime": t.get("runtime"),
             "search_p": window_search_p(cells[t["name"]][0]["outcomes"]["variant"], base,
                                         split, margin_pts, extra)
             if t["name"] in cells else None} for t in trials]
