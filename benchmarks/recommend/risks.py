"""The risks a certificate controls at once: the accuracy margin always, and on request top-1
agreement with the baseline (``--also agreement>=99%``), a language model's mean NLL increase
per token (``--also nll<=0.02``) and a latency quantile (``--latency p99<=3ms``).

A candidate passes when every one of its risks' tests rejects ("breaks this risk") at the
level the procedure gives it: an intersection-union test, whose p-value is the largest of its
risks' (Berger 1982), so controlling each at the level controls their conjunction without a
correction. Each test reads what the certificate reads: the certify split's examples (or
windows) and the final timing's samples, never the search's.

- **agreement**: k of the n certify examples on which the candidate's top-1 class is the
  baseline's; H0 agreement <= a0 against H1 agreement > a0, the exact binomial test
  (p = P(Bin(n, a0) >= k)), its one-sided Clopper-Pearson lower limit beside it.
- **latency**: m of the N timed calls at or under the limit L; H0 the quantile q of a call's
  latency is above L (then a call is at or under L with probability below q), against H1 it
  is at most L: p = P(Bin(N, q) >= m). Distribution-free (no shape assumed), treating the
  calls as exchangeable; its upper confidence bound on the quantile is the order statistic
  the same binomial names.
- **nll** is the language model's, tested over windows (``lm_certificate``).

Torch-free.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from benchmarks.recommend.split import Split, discordant_at
from benchmarks.report import stats
from benchmarks.report.answer import FEW_DISCORDANT

RISKS = ("agreement", "nll")
RISK_FORMS = ("agreement>=P% (top-1 agreement with the baseline, P in (50, 100)) or "
              "nll<=X (a language model's mean NLL increase per token, X in (0, 5])")
QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
UNITS_MS = {"ms": 1.0, "s": 1000.0, "us": 0.001}
LATENCY_FORMS = (f"{'|'.join(QUANTILES)}<=X with a unit ({', '.join(UNITS_MS)}), "
                 f"e.g. p99<=3ms")
MAX_NLL = 5.0
_AGREEMENT = re.compile(r"^\s*agreement\s*>=\s*([0-9]*\.?[0-9]+)\s*(%)?\s*$", re.I)
_NLL = re.compile(r"^\s*nll\s*<=\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*$", re.I)
_LATENCY = re.compile(r"^\s*(p[0-9]+)\s*<=\s*([0-9]*\.?[0-9]+)\s*([a-z]+)\s*$", re.I)


@dataclass(frozen=True)
class Risk:
    """One risk beyond the accuracy margin: ``name`` and its bound (``at_least`` for
    agreement, ``at_most`` for nll, ``quantile`` with ``at_most_ms`` for latency)."""
    name: str
    at_least: float | None = None
    at_most: float | None = None
    quantile: float | None = None
    at_most_ms: float | None = None

    def text(self) -> str:
        """The flag's own form, what a request stores and a certificate names."""
        if self.name == "agreement":
            return f"agreement>={100 * self.at_least:g}%"
        if self.name == "nll":
            return f"nll<={self.at_most:g}"
        label = next(k for k, v in QUANTILES.items() if v == self.quantile)
        return f"{label}<={self.at_most_ms:g}ms"

    def words(self) -> str:
        """The bound as a reader says it."""
        if self.name == "agreement":
            return f"top-1 agreement with the baseline of at least {100 * self.at_least:g}%"
        if self.name == "nll":
            return f"a mean NLL increase of at most {self.at_most:g} nats per token"
        label = next(k for k, v in QUANTILES.items() if v == self.quantile)
        return f"a {label} latency of at most {self.at_most_ms:g} ms per call"

    def to_dict(self) -> dict:
        return {k: v for k, v in (("name", self.name), ("at_least", self.at_least),
                                  ("at_most", self.at_most), ("quantile", self.quantile),
                                  ("at_most_ms", self.at_most_ms)) if v is not None}

    @classmethod
    def from_dict(cls, data: dict) -> "Risk":
        return cls(**{k: data.get(k) for k in ("name", "at_least", "at_most", "quantile",
                                                 "at_most_ms")})


def parse_also(text) -> tuple[Risk, ...]:
    """``--also``: risks separated by commas; one line naming the accepted forms otherwise."""
    if text is None or (isinstance(text, (list, tuple)) and not text):
        return ()
    parts = text if isinstance(text, (list, tuple)) else str(text).split(",")
    out: list[Risk] = []
    for part in parts:
        if isinstance(part, Risk):
            out.append(part)
            continue
        part = str(part)
        agreement, nll = _AGREEMENT.match(part), _NLL.match(part)
        risk = None
        if agreement:
            value = float(agreement.group(1))
            share = value / 100 if agreement.group(2) or value > 1 else value
            if 0.5 < share < 1:
                risk = Risk("agreement", at_least=round(share, 12))
        elif nll:
            value = float(nll.group(1))
            if math.isfinite(value) and 0 < value <= MAX_NLL:
                risk = Risk("nll", at_most=value)
        if risk is None:
            raise ValueError(f"--also takes {RISK_FORMS}, separated by commas; got {part!r}")
        if any(r.name == risk.name for r in out):
            raise ValueError(f"--also names {risk.name} twice; give each risk once")
        out.append(risk)
    return tuple(out)


def parse_latency(text) -> Risk | None:
    """``--latency p99<=3ms``; one line naming the accepted forms otherwise."""
    if text is None or text == "":
        return None
    if isinstance(text, Risk):
        return text
    match = _LATENCY.match(str(text))
    bad = ValueError(f"--latency takes {LATENCY_FORMS}; got {text!r}")
    if match is None:
        raise bad
    label, value, unit = match.group(1).lower(), float(match.group(2)), match.group(3).lower()
    if label not in QUANTILES or unit not in UNITS_MS or not math.isfinite(value) \
            or value <= 0:
        raise bad
    return Risk("latency", quantile=QUANTILES[label], at_most_ms=value * UNITS_MS[unit])


# -- the tests -------------------------------------------------------------------------------

def agreement_test(agree: int, n: int, at_least: float, confidence: float) -> dict:
    """H0 agreement <= ``at_least`` against H1 above it: the exact binomial test on ``agree``
    of ``n`` examples; {"p", "estimate", "lower"} (the one-sided lower limit at
    ``confidence``)."""
    from scipy.stats import beta, binom
    if n <= 0:
        return {"p": 1.0, "estimate": None, "lower": None}
    p = float(binom.sf(agree - 1, n, at_least)) if agree > 0 else 1.0
    lower = 0.0 if agree == 0 else float(beta.ppf(1 - confidence, agree, n - agree + 1))
    return {"p": min(1.0, p), "estimate": agree / n, "lower": lower}


def latency_test(samples_ms, quantile: float, at_most_ms: float, confidence: float) -> dict:
    """H0 the ``quantile`` of a call's latency is above ``at_most_ms`` against H1 it is at most
    that, from the calls' ``samples_ms``; {"p", "estimate", "upper", "n"}: the sample
    quantile and the distribution-free upper confidence bound at ``confidence`` (the k-th
    smallest sample, k the least with P(Bin(N, q) < k) >= confidence; None where N calls
    cannot bound it)."""
    from scipy.stats import binom
    values = sorted(float(x) for x in samples_ms or [])
    n = len(values)
    if n == 0:
        return {"p": 1.0, "estimate": None, "upper": None, "n": 0}
    m = sum(1 for x in values if x <= at_most_ms)
    p = float(binom.sf(m - 1, n, quantile)) if m > 0 else 1.0
    k = int(binom.ppf(confidence, n, quantile)) + 1   # P(Bin(n, q) <= k - 1) >= confidence
    upper = values[k - 1] if k <= n else None
    estimate = values[min(n - 1, max(0, math.ceil(quantile * n) - 1))]
    return {"p": min(1.0, p), "estimate": estimate, "upper": upper, "n": n}


# -- each risk's test of one candidate, as a procedure asks it --------------------------------

class RiskTest:
    """A risk's test of one candidate: its decision at a level, and its figures there."""
    name = ""

    def rejects(self, level: float) -> bool:
        raise NotImplementedError

    def figures(self, level: float) -> dict:
        """{"p", ...}: its p-value and what a reader checks it by, at ``level``."""
        raise NotImplementedError


class Accuracy(RiskTest):
    """The margin's paired test on the certify split (``stats.noninferiority``)."""
    name = "accuracy"

    def __init__(self, b: int, c: int, n: int, margin_pts: float, test: str | None = None):
        self.b, self.c, self.n, self.margin, self.forced = b, c, n, margin_pts / 100, test

    def rejects(self, level: float) -> bool:
        return stats.noninferiority_rejects(self.b, self.c, self.n, self.margin, level,
                                            self.forced)

    def figures(self, level: float) -> dict:
        found = stats.noninferiority(self.b, self.c, self.n, self.margin, 1 - level,
                                     self.forced)
        return {"p": found["p_value"], "lower_pts": 100 * found["lower"],
                "test": found["test"], "why": found["why"]}

    def fill(self, tested, figures: dict, confidence: float) -> None:
        """A certificate row's accuracy fields (``certificate.Tested``): the counts, the
        change with its two-sided interval at ``confidence``, the lower limit at the level."""
        b, c, n = self.b, self.c, self.n
        tested.b, tested.c, tested.n = b, c, n
        tested.theta_pts = 100 * (b - c) / n
        tested.interval_pts = stats.paired_difference(b, c, n, confidence,
                                                      self.forced)["ci_pts"]
        tested.lower_pts = figures["lower_pts"]
        tested.test, tested.test_why = figures["test"], figures["why"]
        if b + c < FEW_DISCORDANT:
            tested.notes.append(f"few discordant pairs ({b + c})")


class Agreement(RiskTest):
    name = "agreement"

    def __init__(self, agree: int, n: int, at_least: float):
        self.agree, self.n, self.at_least = agree, n, at_least
        self.p = agreement_test(agree, n, at_least, 0.95)["p"]  # exact: no level needed

    def rejects(self, level: float) -> bool:
        return self.p < level

    def figures(self, level: float) -> dict:
        found = agreement_test(self.agree, self.n, self.at_least, 1 - level)
        return {"p": found["p"], "agree": self.agree, "n": self.n,
                "estimate": found["estimate"], "lower": found["lower"],
                "at_least": self.at_least}


class Latency(RiskTest):
    name = "latency"

    def __init__(self, samples_ms, quantile: float, at_most_ms: float):
        self.samples, self.quantile, self.at_most = list(samples_ms or []), quantile, \
            at_most_ms
        self.p = latency_test(self.samples, quantile, at_most_ms, 0.95)["p"]

    def rejects(self, level: float) -> bool:
        return self.p < level

    def figures(self, level: float) -> dict:
        found = latency_test(self.samples, self.quantile, self.at_most, 1 - level)
        return {"p": found["p"], "estimate_ms": found["estimate"],
                "upper_ms": found["upper"], "calls": found["n"], "quantile": self.quantile,
                "at_most_ms": self.at_most}


def image_tests(mine, base, split: Split, indices,
                margin_pts: float, extra: tuple[Risk, ...], test: str | None = None,
                timed: bool = True) -> tuple[list[RiskTest], list[str]]:
    """(the tests of one image candidate on ``indices``, notes on what could not be tested):
    the accuracy margin, then each extra risk. A risk without its data (no stored classes, no
    final timing) cannot pass: its test is one that never rejects, with the note."""
    b, c = discordant_at(mine.scores.correct_bits, base.scores.correct_bits, split.n, indices)
    tests: list[RiskTest] = [Accuracy(b, c, len(indices), margin_pts, test)]
    notes = []
    for risk in extra:
        if risk.name == "agreement":
            if not (mine.scores.predictions and base.scores.predictions):
                notes.append("no stored classes: its agreement cannot be tested")
                tests.append(Never("agreement"))
                continue
            a = stats.unpack_labels(mine.scores.predictions)
            r = stats.unpack_labels(base.scores.predictions)
            agree = sum(1 for i in indices if a[i] == r[i])
            tests.append(Agreement(agree, len(indices), risk.at_least))
        elif risk.name == "latency":
            if not timed:
                notes.append("not timed again after the search: its latency cannot be "
                             "certified")
                tests.append(Never("latency"))
                continue
            tests.append(Latency(mine.timing.latency_samples_ms, risk.quantile,
                                 risk.at_most_ms))
        else:
            notes.append(f"{risk.name} is a language model's risk: not testable here")
            tests.append(Never(risk.name))
    return tests, notes


class Never(RiskTest):
    """A risk whose data are missing: it never passes."""

    def __init__(self, name: str):
        self.name = name

    def rejects(self, level: float) -> bool:
        return False

    def figures(self, level: float) -> dict:
        return {"p": 1.0, "missing": True}
