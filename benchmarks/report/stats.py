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
import functools
import math
import statistics

from benchmarks.report.paired_tests import (  # noqa: F401  (the product's names for them)
    BERGER_BOOS_GAMMA,
    CONFIDENCE,
    EXACT_BELOW,
    EXACT_SLACK,
    P_ABSOLUTE,
    P_RELATIVE,
    _tango_z,
    exact_interval,
    exact_lower,
    exact_p_decided,
    exact_p_two_sided,
    exact_p_upper,
    tango_interval,
    tango_lower,
    tango_p_two_sided,
)

# Below this p-value a difference is called real; at or above it, "within noise".
ALPHA = 0.05


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


def pack_labels(labels) -> str:
    """Per-example class indices as ``u1:``/``u2:``/``u4:`` and base64 of their little-endian
    bytes (one byte each for up to 256 classes: 2,500 digits take 3.4 KB)."""
    labels = [int(x) for x in labels]
    if any(x < 0 for x in labels):
        raise ValueError("class indices must be >= 0")
    top = max(labels, default=0)
    width = 1 if top < 2 ** 8 else 2 if top < 2 ** 16 else 4
    raw = b"".join(x.to_bytes(width, "little") for x in labels)
    return f"u{width}:" + base64.b64encode(raw).decode("ascii")


def unpack_labels(text: str) -> list[int]:
    head, _, body = text.partition(":")
    width = {"u1": 1, "u2": 2, "u4": 4}.get(head)
    if width is None:
        raise ValueError(f"packed labels start with u1:, u2: or u4:; got {text[:8]!r}")
    raw = base64.b64decode(body)
    return [int.from_bytes(raw[i:i + width], "little") for i in range(0, len(raw), width)]


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


def paired_ratio(reference: list[float], candidate: list[float],
                 confidence: float = CONFIDENCE, resamples: int = 2000, seed: int = 0
                 ) -> dict | None:
    """The median over timing rounds of reference[r] / candidate[r] (each round's p50: a
    speed-up when both are latencies), with a percentile bootstrap interval of that same
    median over resampled rounds: the point and its interval are one statistic. Rounds are
    paired: the two were timed in the same ones, where host drift lives. None without a
    round; the interval is None with fewer than two."""
    rounds = min(len(reference), len(candidate))
    ratios = [r / c for r, c in zip(reference[:rounds], candidate[:rounds]) if c > 0]
    if not ratios:
        return None
    point = statistics.median(ratios)
    if len(ratios) < 2:
        return {"ratio": point, "ci": None, "rounds": len(ratios), "resamples": 0}
    import random
    rng = random.Random(seed)
    k = len(ratios)
    draws = sorted(statistics.median(ratios[rng.randrange(k)] for _ in range(k))
                   for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = draws[int(math.floor(tail * (resamples - 1)))]
    high = draws[int(math.ceil((1 - tail) * (resamples - 1)))]
    # The percentile interval of a median holds the sample median but for a resampling
    # accident with very few rounds: the interval is widened to it, never shown beside it.
    return {"ratio": point, "ci": [min(low, point), max(high, point)], "rounds": k,
            "resamples": resamples}


def exact_rule(b: int, c: int) -> tuple[bool, str]:
    """(whether the exact test is used, why): the rule every table and the certificate
    share."""
    if b + c < EXACT_BELOW:
        return True, (f"few discordant pairs ({b + c} < {EXACT_BELOW}): the score interval's "
                      f"size is not guaranteed, so the exact unconditional test")
    return False, (f"{b + c} discordant pairs (>= {EXACT_BELOW}): Tango's score test, whose "
                   f"normal approximation holds there")


EXACT_TEST = "exact unconditional (Sidik 2003, Berger-Boos restricted)"
SCORE_TEST = "Tango score"
# Each test in a reader's words (its reference stays in the JSON's ``test`` and on hover).
TEST_WORDS = {EXACT_TEST: "an exact test (few differing images)",
              SCORE_TEST: "a score test (many differing images)"}


def _chosen(b: int, c: int, test: str | None) -> tuple[bool, str]:
    """``exact_rule``, unless ``test`` forces Tango's (what a stored certificate used)."""
    if test == SCORE_TEST:
        return False, "Tango's score test, as the certificate was stored with"
    if test not in (None, EXACT_TEST):
        raise ValueError(f"test must be {EXACT_TEST!r} or {SCORE_TEST!r}; got {test!r}")
    return exact_rule(b, c)


def paired_difference(b: int, c: int, n: int, confidence: float = CONFIDENCE,
                      test: str | None = None) -> dict:
    """The paired difference theta = (b - c) / n with its two-sided interval and the
    two-sided p-value for theta = 0, both from one test (``exact_rule``), so the interval
    excludes zero exactly when p < 1 - confidence. Points, not fractions, in ``*_pts``.
    Cached: the tables, the answer and the JSON ask for the same counts several times.
    ``test``: SCORE_TEST forces Tango's (a certificate stored before the exact test)."""
    if n <= 0:
        raise ValueError(f"a paired difference needs examples; got n={n}")
    if b < 0 or c < 0 or b + c > n:
        raise ValueError(f"discordant counts must be within 0 and n; got b={b}, c={c}, n={n}")
    out = _paired_difference(int(b), int(c), int(n), float(confidence), test)
    return {**out, "ci_pts": list(out["ci_pts"])}


@functools.lru_cache(maxsize=4096)
def _paired_difference(b: int, c: int, n: int, confidence: float, test: str | None) -> dict:
    exact, why = _chosen(b, c, test)
    if exact:
        low, high = exact_interval(b, c, n, confidence)
        p = exact_p_two_sided(b, c, n, confidence)
    else:
        p = tango_p_two_sided(b, c, n)
        low, high = tango_interval(b, c, n, confidence, anchored=p < 1 - confidence)
    return {"difference_pts": 100 * (b - c) / n, "ci_pts": [100 * low, 100 * high],
            "p_value": p, "test": EXACT_TEST if exact else SCORE_TEST, "why": why,
            "b": b, "c": c, "n": n}


# Bump when ``paired_difference``'s figures for the same counts change (its tests, their grid
# or tolerances): a result kept under ``paired_key`` is then computed again.
PAIRED_VERSION = 1


def paired_key(b: int, c: int, n: int, confidence: float = CONFIDENCE) -> str:
    """The name a ``paired_difference`` result is kept under beside what it was computed
    from (a sensitivity cell's measurement): an exact interval takes a tenth of a second."""
    return f"{int(b)},{int(c)},{int(n)},{float(confidence)!r},v{PAIRED_VERSION}"


def paired_bits(a_bits: str, b_bits: str, n: int, confidence: float = CONFIDENCE) -> dict:
    """``paired_difference`` of the first against the second, from their correctness bits."""
    return paired_difference(*discordant(unpack_bits(a_bits, n), unpack_bits(b_bits, n)), n,
                             confidence)


def noninferiority(b: int, c: int, n: int, margin: float, confidence: float = CONFIDENCE,
                   test: str | None = None) -> dict:
    """H0 theta <= -margin against H1 theta > -margin (margin a fraction): the one-sided
    lower limit at ``confidence`` and the p-value at -margin from one test (``exact_rule``),
    anchored so that lower > -margin exactly when p < 1 - confidence. ``test``: as
    ``paired_difference``'s."""
    return dict(_noninferiority(int(b), int(c), int(n), float(margin), float(confidence),
                                test))


@functools.lru_cache(maxsize=4096)
def _noninferiority(b: int, c: int, n: int, margin: float, confidence: float,
                    test: str | None) -> dict:
    alpha = 1 - confidence
    exact, why = _chosen(b, c, test)
    if exact:
        p = exact_p_decided(b, c, n, -margin, alpha) if margin < 1 else 0.0
        lower = exact_lower(b, c, n, confidence, anchor=-margin)
    else:
        from scipy.stats import norm
        p = float(norm.sf(_tango_z(b, c, n, -margin)))
        lower = tango_lower(b, c, n, confidence, anchor=-margin, reject=p < alpha)
    return {"lower": lower, "p_value": p, "rejected": p < alpha,
            "test": EXACT_TEST if exact else SCORE_TEST, "why": why}


@functools.lru_cache(maxsize=65536)
def noninferiority_rejects(b: int, c: int, n: int, margin: float, level: float,
                           test: str | None = None) -> bool:
    """Whether ``noninferiority``'s test rejects H0 theta <= -margin at ``level``: a decision
    alone, as a multiple-testing procedure asks it at each candidate's share of alpha (the
    exact test decides a level without refining its p-value: a few milliseconds)."""
    if level <= 0:
        return False
    if margin >= 1:
        return True
    exact, _ = _chosen(b, c, test)
    if exact:
        return exact_p_upper(b, c, n, -margin, versus=level) < level
    from scipy.stats import norm
    return float(norm.sf(_tango_z(b, c, n, -margin))) < level


@functools.lru_cache(maxsize=65536)
def noninferiority_p(b: int, c: int, n: int, margin: float, test: str | None = None) -> float:
    """The p-value of H0 theta <= -margin (``noninferiority``'s test), to the exact test's
    own precision (its grid's slack, 0.001): what orders candidates, not what decides them."""
    if margin >= 1:
        return 0.0
    exact, _ = _chosen(b, c, test)
    if exact:
        return exact_p_upper(b, c, n, -margin)
    from scipy.stats import norm
    return float(norm.sf(_tango_z(b, c, n, -margin)))


@functools.lru_cache(maxsize=1024)
def noninferiority_lower(b: int, c: int, n: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided lower limit of theta at ``confidence`` from the test the certificate
    uses for these counts (``exact_rule``): what a margin must be above to be certified."""
    if exact_rule(b, c)[0]:
        return exact_lower(b, c, n, confidence)
    return tango_lower(b, c, n, confidence)
