"""Power, up front: the smallest margin a certify split can certify at all.

A candidate identical to the baseline on every certify example (b = c = 0) is the best a
candidate can do; its one-sided lower limit at n examples, from the test the certificate uses
(``stats.noninferiority_lower``: exact where discordant pairs are few), is its bound. A margin
at or below that magnitude cannot be certified whatever the search finds, so it is refused
before the search starts, naming the margin that can. That margin is the best case only: a
compressed candidate rarely agrees with its baseline on every example, and at it any one
disagreement fails. The refusal also names, and advises, the margin a candidate needs that
differs from the baseline on ``DISCORDANT_SHARE`` of the examples, as often right as wrong.

Before a job is even submitted, ``data_power`` says the same from the registry's test sizes
(the Recommend panel's statement and its one-click fixes: the margin a typical candidate can
pass, and ``embedded_that_certifies``, the embedded data set that can). Torch-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from benchmarks.report.stats import noninferiority, noninferiority_lower


# How often a compressed candidate typically disagrees with its baseline (measured runs:
# docs/methodology.md, "Power, up front").
DISCORDANT_SHARE = 1 / 30


def _hundredths_above(limit: float) -> float:
    rounded = math.ceil(limit * 100) / 100
    return round(rounded + 0.01, 2) if rounded <= limit else rounded


def _certified_hundredths(b: int, c: int, n: int, confidence: float) -> float:
    """The smallest margin, in hundredths of a point, at which the certificate's own test
    certifies a candidate with these discordant counts. The lower limit is found by bisection
    to within 0.005 points, so the hundredth just above it is confirmed by the test at that
    margin (the certificate's judge asks the same), and the next taken where it fails."""
    margin = _hundredths_above(-100 * noninferiority_lower(b, c, n, confidence))
    while margin < 100 and not noninferiority(b, c, n, margin / 100, confidence)["rejected"]:
        margin = round(margin + 0.01, 2)
    return margin


def smallest_margin_pts(n: int, confidence: float) -> float:
    """The magnitude, in points, of the lower limit of a candidate identical to the baseline
    on ``n`` certify examples: a margin must be above it."""
    return -100 * noninferiority_lower(0, 0, n, confidence)


def certifiable_pts(n: int, confidence: float) -> float:
    """The smallest margin, rounded up to a hundredth of a point, that can be certified."""
    return _certified_hundredths(0, 0, n, confidence)


def typical_margin_pts(n: int, confidence: float, share: float = DISCORDANT_SHARE) -> float:
    """The margin, rounded up to a hundredth of a point, that a candidate needs whose accuracy
    equals the baseline's but which differs from it on ``share`` of the ``n`` examples (as
    many gained as lost)."""
    each = max(1, round(n * share / 2))
    return _certified_hundredths(each, each, n, confidence)


def refusal(margin_pts: float, n: int, confidence: float, unit: str = "test images") -> str:
    """Why ``margin_pts`` cannot be certified on ``n`` certify examples: the best case and the
    typical candidate's margin, in one sentence with no command-line advice (the page offers
    its fixes as buttons, the CLI appends its flag)."""
    can = certifiable_pts(n, confidence)
    point = "point" if margin_pts == 1 else "points"
    typical = typical_margin_pts(n, confidence)
    return (f"the certify split of {n} {unit} cannot certify {margin_pts:g} {point} at "
            f"{confidence:.0%} confidence; it can certify {can:g} points only for a candidate "
            f"that agrees with the baseline on every example, and {typical:g} points for one "
            f"that differs on 1 in {round(1 / DISCORDANT_SHARE)} of them, as often right as "
            f"wrong")


def check_power(margin_pts: float, n: int, confidence: float, unit: str = "test images"
                ) -> float:
    """The smallest certifiable margin; ValueError (one line) when ``margin_pts`` is not above
    it."""
    can = certifiable_pts(n, confidence)
    if margin_pts < can and not noninferiority(0, 0, n, margin_pts / 100,
                                               confidence)["rejected"]:
        typical = typical_margin_pts(n, confidence)
        raise ValueError(f"{refusal(margin_pts, n, confidence, unit)}; use a larger data set "
                         f"or a wider margin (--within {typical:g}pt)")
    return can


# -- before a job is submitted: what a data set can certify, from the registry alone ------

@dataclass(frozen=True)
class DataPower:
    """What ``dataset``'s certify split can certify at ``margin`` (a ``Margin``): known from
    the registry's test size before anything loads. ``certify`` is None where the size is
    known only once the data is read (an image folder): the job checks it then."""
    dataset: str
    margin: object
    confidence: float
    certify: int | None

    @property
    def margin_pts(self) -> float:
        """The margin in points; a relative one at most its value (a baseline at 100%)."""
        return self.margin.upper_points

    @property
    def smallest(self) -> float | None:
        return None if self.certify is None else certifiable_pts(self.certify, self.confidence)

    @property
    def typical(self) -> float | None:
        return None if self.certify is None else typical_margin_pts(self.certify,
                                                                    self.confidence)

    @property
    def refused(self) -> bool:
        """No candidate can be certified: the job would be refused before it starts."""
        return self.certify is not None and self.margin_pts <= smallest_margin_pts(
            self.certify, self.confidence)

    @property
    def typical_fails(self) -> bool:
        """Certifiable only for a candidate that (nearly) always agrees with the baseline."""
        return self.certify is not None and self.margin_pts < self.typical

    def sentence(self) -> str:
        """What the chosen data can certify, in words a page shows (no flags)."""
        every = round(1 / DISCORDANT_SHARE)
        if self.certify is None:
            # A parametric name's argument (an image folder's path) is the server's: unsaid.
            return (f"On {self.dataset.partition(':')[0]}, the certify split is known once "
                    f"its images are read; a margin it cannot certify is refused then, before "
                    f"the search.")
        if self.refused:
            text = refusal(self.margin_pts, self.certify, self.confidence)
            return f"On {self.dataset}, {text}."
        head = (f"On {self.dataset}, the certify split of {self.certify:,} test images can "
                f"certify {self.margin.text()}")
        if self.typical_fails:
            return (f"{head} only for a candidate that agrees with the baseline on nearly "
                    f"every example; one that differs on 1 in {every} needs {self.typical:g} "
                    f"points.")
        return (f"{head}: a candidate that differs from the baseline on 1 in {every} "
                f"examples needs {self.typical:g} points (one that agrees on every example, "
                f"{self.smallest:g}).")


def certify_size(dataset: str, certify_fraction: float) -> int | None:
    """The certify split's size for ``dataset`` (the registry's test size, cut as
    ``split.make_split`` cuts it), or None where it is known only once the data is read."""
    from benchmarks.recommend.split import make_split
    from benchmarks.spec.datasets import dataset_entry
    n = dataset_entry(dataset).test_examples
    return None if n is None else len(make_split(n, 0, certify_fraction).certify)


def data_power(dataset: str, within, confidence: float, certify_fraction: float
               ) -> DataPower:
    """What ``dataset`` can certify at ``within`` (text such as ``1pt``, or a ``Margin``);
    the ValueError of a bad margin or an unknown data set otherwise."""
    from benchmarks.recommend.request import Margin
    margin = within if isinstance(within, Margin) else Margin.parse(within)
    return DataPower(dataset, margin, confidence, certify_size(dataset, certify_fraction))


def embedded_that_certifies(within, confidence: float, certify_fraction: float
                            ) -> str | None:
    """The smallest embedded data set on which a candidate that differs from the baseline on
    1 in 30 examples can be certified at ``within`` (the one-click switch), or None."""
    from benchmarks.spec.datasets import dataset_entries
    fits = [(e.test_examples, e.name) for e in dataset_entries()
            if e.embedded and e.has_labels and e.test_examples
            and not data_power(e.name, within, confidence, certify_fraction).typical_fails]
    return min(fits)[1] if fits else None
