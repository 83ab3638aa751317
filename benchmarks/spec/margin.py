"""An accuracy margin, the one shape every answer takes it in: points (``1pt``) or a share of
the baseline's accuracy (``2%``), bounded, parsed and worded in one place. The certified
recommendation (``--within``) and a run's exploratory answer (its margin in points) both read
it. Torch-free."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MAX_MARGIN_PTS = 50.0
MARGIN_FORMS = "points (1pt, 0.5pts) or a share of the baseline's accuracy (2%)"
_MARGIN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*(pts?|points?|%)?\s*$", re.I)


@dataclass(frozen=True)
class Margin:
    """The margin delta: ``value`` points, or with ``relative`` a percentage of the
    baseline's accuracy."""
    value: float
    relative: bool = False

    @classmethod
    def parse(cls, text, what: str = "--within") -> "Margin":
        """``1pt``, ``0.5 pts``, ``2%``, or a number of points; ``what`` names it in the
        refusal (the flag, or the field)."""
        bad = ValueError(f"{what} must be a margin in (0, {MAX_MARGIN_PTS:g}] {MARGIN_FORMS}; "
                         f"got {text!r}")
        if isinstance(text, (int, float)) and not isinstance(text, bool):
            text = f"{text}pt"
        if not isinstance(text, str):
            raise bad
        match = _MARGIN.match(text)
        if match is None:  # a minus sign lands here too: a negative margin
            raise bad
        value, unit = float(match.group(1)), (match.group(2) or "pt").lower()
        if not math.isfinite(value) or not 0 < value <= MAX_MARGIN_PTS:
            raise bad
        return cls(value, relative=unit == "%")

    def points(self, baseline_accuracy: float | None) -> float:
        """The margin in accuracy points (a relative one of this baseline accuracy, 0-1)."""
        if not self.relative:
            return self.value
        if baseline_accuracy is None:
            raise ValueError("a relative margin (--within N%) needs the baseline's accuracy, "
                             "and this data set has no labels")
        return self.value * baseline_accuracy

    @property
    def upper_points(self) -> float:
        """The most points it can be, before the baseline is known (100% accuracy)."""
        return self.value

    def text(self) -> str:
        return f"{self.value:g}%" if self.relative else f"{self.value:g}pt"
