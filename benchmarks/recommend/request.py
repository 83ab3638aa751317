"""What a recommendation is asked: the margin, the confidence, the objective, the budget,
how the test examples are split. Torch-free and self-validating, so the CLI, the queue's
worker and the dashboard's panel refuse a bad value alike, before anything runs.

``--within 1pt`` is a margin in accuracy points; ``--within 2%`` is relative, a share of the
baseline's accuracy on the search split (known once the baseline is trained, before the
search). ``--budget 20m`` caps the whole command's wall time (the search uses it, unless
``--patience`` is given), ``--trials N`` the number of new trials; without either, the search
stops at ``DEFAULT_TRIALS`` or when ``patience`` trials in a row add nothing to the front of
what it found.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from benchmarks.recommend.risks import (
    LATENCY_FORMS,
    RISK_FORMS,
    parse_also,
    parse_latency,
)
from benchmarks.report.answer import OBJECTIVES
from benchmarks.spec.margin import MARGIN_FORMS, MAX_MARGIN_PTS, Margin  # noqa: F401 (re-exported)
from optimizers.settings import setting, setting_fields

SAMPLERS = ("tpe", "nsga2")
DEFAULT_TRIALS = 32
# This many completed trials in a row that leave the front of feasible, faster trials as it
# was, and the search is done (without --trials: a search that converged says so).
DEFAULT_PATIENCE = 10
# The sampler's start: TPE's random trials before its model, NSGA-II's first generation (the
# registry's default points count among them). A search cannot converge inside it: it ended
# a 20-minute search after 11 trials in 87 s, when the model had proposed 3.
STARTUP_TRIALS = 8
# A candidate whose search speed-up interval does not clear this is "not faster": a 1.06x
# fp16 autocast on a CPU opened the sequence and ended it.
DEFAULT_MIN_SPEEDUP = 1.1
DEFAULT_CERTIFY_FRACTION = 0.5
CERTIFY_FRACTION_RANGE = (0.1, 0.9)
# At most this many of the search's front go on to be certified: each is timed again with the
# baseline in the final rounds.
DEFAULT_MAX_CANDIDATES = 6
BUDGET_FORMS = "a wall time such as 90s, 20m or 1h"
_BUDGET = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(s|sec|m|min|h)?\s*$", re.I)


def parse_budget(text) -> float | None:
    """Seconds of wall time from ``90s``, ``20m``, ``1h`` (a bare number: minutes)."""
    if text is None:
        return None
    match = _BUDGET.match(str(text))
    seconds = None
    if match is not None:
        unit = (match.group(2) or "m").lower()[0]
        seconds = float(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[unit]
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"--budget must be {BUDGET_FORMS}, above 0; got {text!r}")
    return seconds


@dataclass(frozen=True)
class RecommendRequest:
    """Each field's ``setting(...)`` is its one declaration: its default and help, which the
    ``recommend`` command's flags and the Recommend panel read (``defaults``); the checks
    below word their refusals as the command's flags."""

    within: str = setting("1pt", f"the margin delta: {MARGIN_FORMS}; in (0, "
                          f"{MAX_MARGIN_PTS:g}]", text=True, metavar="MARGIN")
    confidence: float = setting(0.95, "the confidence of the certificate, in (0.5, 1)",
                                low=0.5, high=1.0, low_open=True)
    objective: str = setting("p50", "what 'fastest' means", choices=OBJECTIVES)
    budget_s: float | None = setting(None, f"the whole command's wall time: {BUDGET_FORMS}",
                                     low=0.0, low_open=True, nullable=True, flag="--budget",
                                     metavar="TIME", none_means="no limit")
    trials: int | None = setting(
        None, f"new trials at most (default {DEFAULT_TRIALS} without --budget; the search "
        f"also stops when it converges)", integer=True, low=1, nullable=True)
    certify_fraction: float = setting(
        DEFAULT_CERTIFY_FRACTION, f"the share of the test examples kept to certify, in "
        f"{list(CERTIFY_FRACTION_RANGE)}", low=CERTIFY_FRACTION_RANGE[0],
        high=CERTIFY_FRACTION_RANGE[1])
    split_seed: int = setting(0, "the seed of the search/certify split (recorded with the "
                              "run)", integer=True, low=0, high=2**32 - 1)
    sampler: str = setting("tpe", "Optuna's sampler, seeded by --seed", choices=SAMPLERS)
    patience: int | None = setting(
        None, f"trials in a row that find nothing better before the search stops (counted "
        f"after the sampler's first {STARTUP_TRIALS}, its random start; default "
        f"{DEFAULT_PATIENCE}, none with --budget: the search uses its budget)", integer=True,
        low=1, nullable=True)
    max_candidates: int = setting(DEFAULT_MAX_CANDIDATES, "the search's front members "
                                  "certified at most", integer=True, low=1)
    also: str | None = setting(
        None, f"further risks certified with the margin: {RISK_FORMS}", text=True,
        nullable=True, none_means="the accuracy margin alone", metavar="RISK[,...]")
    latency: str | None = setting(
        None, f"a latency limit certified on the final timing: {LATENCY_FORMS}", text=True,
        nullable=True, none_means="no limit", metavar="LIMIT")
    min_speedup: float = setting(
        DEFAULT_MIN_SPEEDUP, "a candidate is certified only if its search speed-up is above "
        "this beyond noise (its interval's lower end); >= 1", low=1.0)

    @classmethod
    def defaults(cls) -> dict:
        """{field: default}: what the command's flags and the panel start from."""
        return {name: default for name, _, default in setting_fields(cls)}

    @classmethod
    def help(cls, name: str) -> str:
        return next(meta.help for n, meta, _ in setting_fields(cls) if n == name)

    def __post_init__(self):
        object.__setattr__(self, "within", self.margin.text())
        c = self.confidence
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0.5 < c < 1:
            raise ValueError(f"--confidence must be in (0.5, 1), e.g. 0.95; got {c!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"--objective must be one of {'|'.join(OBJECTIVES)}; got "
                             f"{self.objective!r}")
        if self.budget_s is not None and (isinstance(self.budget_s, bool) or not isinstance(
                self.budget_s, (int, float)) or not math.isfinite(self.budget_s)
                or self.budget_s <= 0):
            raise ValueError(f"--budget must be {BUDGET_FORMS}, above 0; got {self.budget_s!r}")
        for name, low in (("trials", 1), ("patience", 1), ("max_candidates", 1)):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < low):
                raise ValueError(f"--{name.replace('_', '-')} must be an integer >= {low}; got "
                                 f"{value!r}")
        low, high = CERTIFY_FRACTION_RANGE
        f = self.certify_fraction
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not low <= f <= high:
            raise ValueError(f"--certify-fraction must be in [{low}, {high}]; got {f!r}")
        if isinstance(self.split_seed, bool) or not isinstance(self.split_seed, int) \
                or not 0 <= self.split_seed < 2**32:
            raise ValueError(f"--split-seed must be an integer in [0, 2^32); got "
                             f"{self.split_seed!r}")
        # The risks in their own form, parsed once: refused in one line naming the forms.
        object.__setattr__(self, "also", ",".join(r.text() for r in parse_also(self.also))
                           or None)
        latency = parse_latency(self.latency)
        object.__setattr__(self, "latency", None if latency is None else latency.text())
        m = self.min_speedup
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not math.isfinite(m) \
                or m < 1:
            raise ValueError(f"--min-speedup must be a ratio >= 1 (e.g. 1.1: 10% faster); got "
                             f"{m!r}")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"--sampler must be one of {'|'.join(SAMPLERS)}; got "
                             f"{self.sampler!r}")

    @property
    def margin(self) -> Margin:
        return Margin.parse(self.within)

    @property
    def max_trials(self) -> int | None:
        """New trials at most: --trials, else the default unless a budget bounds the time."""
        if self.trials is not None:
            return self.trials
        return None if self.budget_s is not None else DEFAULT_TRIALS

    @property
    def quiet_limit(self) -> int | None:
        """Trials in a row that find nothing better before the search ends on its own: the
        --patience given; else DEFAULT_PATIENCE, unless --budget says how long to search
        (a 20-minute search had ended after 4.5 minutes, its channel pruning barely tried);
        never when --trials asks for exactly N."""
        if self.trials is not None:
            return None
        if self.patience is not None:
            return self.patience
        return None if self.budget_s is not None else DEFAULT_PATIENCE

    @property
    def risks(self) -> tuple:
        """The risks beyond the accuracy margin (``risks.Risk``), the latency limit last."""
        latency = parse_latency(self.latency)
        return parse_also(self.also) + ((latency,) if latency is not None else ())

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RecommendRequest":
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})
