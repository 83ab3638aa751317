"""Power, up front: the smallest margin a certify split can certify at all.

A candidate identical to the baseline on every certify example (b = c = 0) is the best a
candidate can do; its one-sided Tango lower limit at n examples is -z^2 / (n + z^2). A margin
at or below that magnitude cannot be certified whatever the search finds, so it is refused
before the search starts, naming the margin that can. That margin is the best case only: a
compressed candidate rarely agrees with its baseline on every example, and at it any one
disagreement fails. The refusal also names, and advises, the margin a candidate needs that
differs from the baseline on ``DISCORDANT_SHARE`` of the examples, as often right as wrong.
Torch-free.
"""

from __future__ import annotations

import math

from benchmarks.report.stats import tango_lower


# How often a compressed candidate typically disagrees with its baseline (measured runs:
# docs/methodology.md, "Power, up front").
DISCORDANT_SHARE = 1 / 30


def _hundredths_above(limit: float) -> float:
    rounded = math.ceil(limit * 100) / 100
    return round(rounded + 0.01, 2) if rounded <= limit else rounded


def smallest_margin_pts(n: int, confidence: float) -> float:
    """The magnitude, in points, of the lower limit of a candidate identical to the baseline
    on ``n`` certify examples: a margin must be above it."""
    return -100 * tango_lower(0, 0, n, confidence)


def certifiable_pts(n: int, confidence: float) -> float:
    """The smallest margin, rounded up to a hundredth of a point, that can be certified."""
    return _hundredths_above(smallest_margin_pts(n, confidence))


def typical_margin_pts(n: int, confidence: float, share: float = DISCORDANT_SHARE) -> float:
    """The margin, rounded up to a hundredth of a point, that a candidate needs whose accuracy
    equals the baseline's but which differs from it on ``share`` of the ``n`` examples (as
    many gained as lost)."""
    each = max(1, round(n * share / 2))
    return _hundredths_above(-100 * tango_lower(each, each, n, confidence))


def check_power(margin_pts: float, n: int, confidence: float, unit: str = "test images"
                ) -> float:
    """The smallest certifiable margin; ValueError (one line) when ``margin_pts`` is not above
    it."""
    can = certifiable_pts(n, confidence)
    if margin_pts <= smallest_margin_pts(n, confidence):
        point = "point" if margin_pts == 1 else "points"
        typical = typical_margin_pts(n, confidence)
        raise ValueError(f"the certify split of {n} {unit} cannot certify {margin_pts:g} "
                         f"{point} at {confidence:.0%} confidence; it can certify {can:g} "
                         f"points only for a candidate that agrees with the baseline on "
                         f"every example, and {typical:g} points for one that differs on 1 "
                         f"in {round(1 / DISCORDANT_SHARE)} of them, as often right as wrong; "
                         f"use a larger data set or a wider margin (--within {typical:g}pt)")
    return can
