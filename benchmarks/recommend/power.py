"""Power, up front: the smallest margin a certify split can certify at all.

A candidate identical to the baseline on every certify example (b = c = 0) is the best a
candidate can do; its one-sided Tango lower limit at n examples is -z^2 / (n + z^2). A margin
at or below that magnitude cannot be certified whatever the search finds, so it is refused
before the search starts, naming the margin that can. Torch-free.
"""

from __future__ import annotations

import math

from benchmarks.report.stats import tango_lower


def smallest_margin_pts(n: int, confidence: float) -> float:
    """The magnitude, in points, of the lower limit of a candidate identical to the baseline
    on ``n`` certify examples: a margin must be above it."""
    return -100 * tango_lower(0, 0, n, confidence)


def certifiable_pts(n: int, confidence: float) -> float:
    """The smallest margin, rounded up to a hundredth of a point, that can be certified."""
    limit = smallest_margin_pts(n, confidence)
    rounded = math.ceil(limit * 100) / 100
    return rounded + 0.01 if rounded <= limit else rounded


def check_power(margin_pts: float, n: int, confidence: float, unit: str = "test images"
                ) -> float:
    """The smallest certifiable margin; ValueError (one line) when ``margin_pts`` is not above
    it."""
    can = certifiable_pts(n, confidence)
    if margin_pts <= smallest_margin_pts(n, confidence):
        point = "point" if margin_pts == 1 else "points"
        raise ValueError(f"the certify split of {n} {unit} cannot certify {margin_pts:g} "
                         f"{point} at {confidence:.0%} confidence; it can certify {can:g} "
                         f"points; use a larger data set or a wider margin (--within "
                         f"{can:g}pt)")
    return can
