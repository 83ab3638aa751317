"""How sure a comparison is: accuracy intervals, paired tests, spreads across seeds.

One test image of digits is 0.28 points, so two accuracies differ "for real" only when a
paired test on the same examples says so. The arithmetic comes from SciPy (imported on first
use: the dashboard draws its first page without it):

- Wilson 95% interval for an accuracy: ``binomtest(k, n).proportion_ci(method="wilson")``;
- exact McNemar test of two models on the same examples: a two-sided binomial test of the
  discordant pairs, ``binomtest(b, b + c, 0.5)``;
- a Student-t interval for a mean over seeds (paired differences, e.g. distillation against
  its scratch twin), and the paired t-test of per-seed differences (``paired_t``:
  ``scipy.stats.ttest_1samp`` on the differences, written out).

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


def flipped(reference_bits: str, bits: str, n: int, limit: int | None = None) -> dict:
    """The examples (test-split indices) that became wrong, and those that became right,
    against the reference, with their counts; at most ``limit`` indices of each listed."""
    ref, mine = unpack_bits(reference_bits, n), unpack_bits(bits, n)
    wrong = [i for i, (r, m) in enumerate(zip(ref, mine)) if r and not m]
    right = [i for i, (r, m) in enumerate(zip(ref, mine)) if m and not r]
    return {"became_wrong": wrong[:limit], "became_right": right[:limit],
            "counts": {"became_wrong": len(wrong), "became_right": len(right)}}


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


def paired_t(differences: list[float], confidence: float = CONFIDENCE) -> dict | None:
    """The paired t-test of per-seed differences (each seed's variant against the baseline
    trained with the same seed): their mean, std, Student-t interval and two-sided p-value
    for a mean of zero. None below two differences. Differences that all agree have no
    spread: p is 1 when they are all zero and 0 otherwise."""
    summary = mean_interval(differences, confidence)
    if summary is None or summary["n"] < 2:
        return None
    mean, std, n = summary["mean"], summary["std"], summary["n"]
    if std == 0:
        p = 1.0 if mean == 0 else 0.0
    else:
        from scipy.stats import t
        p = float(2 * t.sf(abs(mean) / (std / math.sqrt(n)), n - 1))
    return {**summary, "p_value": p, "test": "paired t-test over seeds"}


# -- a paired difference of accuracies: Tango's score interval -------------------------------

def _tango_z(b: int, c: int, n: int, theta0: float) -> float:
    """Tango's score statistic for H0: theta = theta0, theta = (b - c) / n the difference of
    paired proportions, with the restricted MLE of the discordant cell (Tango 1998, Stat Med
    17:891-908)."""
    w = -b - c + (2 * n - b + c) * theta0
    q = (math.sqrt(max(0.0, w * w + 8 * n * c * theta0 * (1 - theta0))) - w) / (4 * n)
    variance = n * (2 * q + theta0 * (1 - theta0))
    if variance <= 0:
        return math.copysign(math.inf, b - c - n * theta0) if b - c != n * theta0 else 0.0
    return (b - c - n * theta0) / math.sqrt(variance)


def _root(f, low: float, high: float, tol: float = 1e-10) -> float:
    """The root of a decreasing ``f`` on [low, high] by bisection (f(low) > 0 > f(high))."""
    for _ in range(200):
        mid = (low + high) / 2
        if f(mid) > 0:
            low = mid
        else:
            high = mid
        if high - low < tol:
            break
    return (low + high) / 2


def tango_interval(b: int, c: int, n: int, confidence: float = CONFIDENCE
                   ) -> tuple[float, float] | None:
    """Two-sided ``confidence`` interval for theta = (b - c) / n, the difference in accuracy
    of two models on the same n examples, b the examples only the first gets right and c
    those only the second does: the values theta0 whose score test does not reject.
    With no discordant pair the interval is still given (about +-z^2/(n+z^2))."""
    if n <= 0:
        return None
    if b < 0 or c < 0 or b + c > n:
        raise ValueError(f"discordant counts must be within 0 and n; got b={b}, c={c}, n={n}")
    from scipy.stats import norm
    z = float(norm.ppf(0.5 + confidence / 2))
    eps = 1e-9
    theta = (b - c) / n
    low = -1.0 if theta <= -1 + eps else _root(lambda t: _tango_z(b, c, n, t) - z,
                                              -1 + eps, theta)
    high = 1.0 if theta >= 1 - eps else _root(lambda t: _tango_z(b, c, n, t) + z,
                                             theta, 1 - eps)
    return low, high


def tango_lower(b: int, c: int, n: int, confidence: float = CONFIDENCE) -> float | None:
    """The one-sided ``confidence`` lower limit of theta (the non-inferiority test's: H0
    theta <= -delta is rejected at level 1 - confidence when this is above -delta)."""
    interval = tango_interval(b, c, n, 2 * confidence - 1)
    return None if interval is None else interval[0]


# -- a ratio of medians, resampled over timing rounds ----------------------------------------

def bootstrap_ratio(reference: list[list[float]], candidate: list[list[float]],
                    confidence: float = CONFIDENCE, resamples: int = 2000, seed: int = 0
                    ) -> dict | None:
    """median(reference) / median(candidate) (a speed-up when both are latencies), with a
    percentile bootstrap interval that resamples whole timing rounds, the same rounds for
    both: rounds are where host drift lives, and the two were timed in the same ones.
    ``reference[r]`` and ``candidate[r]`` are the samples of round r. None without samples;
    the interval is None with fewer than two rounds."""
    rounds = min(len(reference), len(candidate))
    pooled_ref = [x for r in reference[:rounds] for x in r]
    pooled_cand = [x for r in candidate[:rounds] for x in r]
    if not pooled_ref or not pooled_cand:
        return None
    ratio = statistics.median(pooled_ref) / statistics.median(pooled_cand)
    if rounds < 2:
        return {"ratio": ratio, "ci": None, "rounds": rounds, "resamples": 0}
    import random
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        picked = [rng.randrange(rounds) for _ in range(rounds)]
        ref = [x for i in picked for x in reference[i]]
        cand = [x for i in picked for x in candidate[i]]
        draws.append(statistics.median(ref) / statistics.median(cand))
    draws.sort()
    tail = (1 - confidence) / 2
    low = draws[int(math.floor(tail * (resamples - 1)))]
    high = draws[int(math.ceil((1 - tail) * (resamples - 1)))]
    return {"ratio": ratio, "ci": [low, high], "rounds": rounds, "resamples": resamples}
