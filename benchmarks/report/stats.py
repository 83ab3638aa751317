"""How sure a comparison is: accuracy intervals, paired tests, spreads across seeds.

One test image of digits is 0.28 points, so two accuracies differ "for real" only when a
paired test on the same examples says so. The arithmetic comes from SciPy (imported on first
use: the dashboard draws its first page without it):

- Wilson 95% interval for an accuracy: ``binomtest(k, n).proportion_ci(method="wilson")``;
- exact McNemar test of two models on the same examples: a two-sided binomial test of the
  discordant pairs, ``binomtest(b, b + c, 0.5)``;
- a Student-t interval for a mean over seeds (paired differences, e.g. distillation against
  its scratch twin).

Per-example correctness travels as a compact bit string (base64), one bit per test example in
the test split's order, so any two variants of runs on the same test split can be paired.
"""

from __future__ import annotations

import base64
import math
import statistics

# Below this p-value a difference is called real; at or above it, "within noise".
ALPHA = 0.05
CONFIDENCE = 0.95


def pack_bits(correct: list[bool] | tuple[bool, ...]) -> str:
    """Per-example correctness as base64 of a bit array (first example: lowest bit)."""
    value = 0
    for i, ok in enumerate(correct):
        if ok:
            value |= 1 << i
    raw = value.to_bytes(max(1, (len(correct) + 7) // 8), "little")
    return base64.b64encode(raw).decode("ascii")


def unpack_bits(text: str, n: int) -> list[bool]:
    value = int.from_bytes(base64.b64decode(text), "little")
    return [bool(value >> i & 1) for i in range(n)]


def wilson_interval(correct: int, n: int, confidence: float = CONFIDENCE
                    ) -> tuple[float, float] | None:
    if n <= 0:
        return None
    from scipy.stats import binomtest
    ci = binomtest(int(correct), int(n)).proportion_ci(confidence_level=confidence,
                                                       method="wilson")
    return float(ci.low), float(ci.high)


def discordant(a: list[bool], b: list[bool]) -> tuple[int, int]:
    """(a right where b is wrong, b right where a is wrong), on the same examples."""
    if len(a) != len(b):
        raise ValueError(f"paired tests need the same examples: {len(a)} vs {len(b)}")
    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    return only_a, only_b


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (1.0 when none differ)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    from scipy.stats import binomtest
    return float(binomtest(only_a, n, 0.5).pvalue)


def paired_p_value(a_bits: str, b_bits: str, n: int) -> float:
    return mcnemar_exact(*discordant(unpack_bits(a_bits, n), unpack_bits(b_bits, n)))


def mean_interval(values: list[float], confidence: float = CONFIDENCE) -> dict | None:
    """Mean, sample std and Student-t interval of ``values`` (None for an empty list; the
    interval is None for a single value: one seed says nothing about the spread)."""
    if not values:
        return None
    mean = statistics.fmean(values)
    if len(values) < 2:
        return {"mean": mean, "std": None, "ci": None, "n": 1}
    std = statistics.stdev(values)
    from scipy.stats import t
    half = float(t.ppf(0.5 + confidence / 2, len(values) - 1)) * std / math.sqrt(len(values))
    return {"mean": mean, "std": std, "ci": [mean - half, mean + half], "n": len(values)}
