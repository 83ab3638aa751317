"""Paired tests of two accuracies on the same examples, from the discordant counts b (the
candidate right, the reference wrong) and c (the reverse) of n pairs: Tango's score interval,
and the exact unconditional test that replaces it with few discordant pairs. ``stats`` chooses
between them (``exact_rule``) and is what the rest of the product calls; this module holds
the arithmetic of both."""

from __future__ import annotations

import math

CONFIDENCE = 0.95


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


def tango_interval(b: int, c: int, n: int, confidence: float = CONFIDENCE,
                   anchored: bool | None = None) -> tuple[float, float] | None:
    """Two-sided ``confidence`` interval for theta = (b - c) / n, the difference in accuracy
    of two models on the same n examples, b the examples only the first gets right and c
    those only the second does: the values theta0 whose score test does not reject.
    With no discordant pair the interval is still given (about +-z^2/(n+z^2)).
    ``anchored``: whether the test rejects theta0 = 0 (``tango_p_two_sided`` below
    1 - confidence); given, 0 brackets the root search, so the interval excludes zero
    exactly then, whatever the bisection's rounding."""
    if n <= 0:
        return None
    if b < 0 or c < 0 or b + c > n:
        raise ValueError(f"discordant counts must be within 0 and n; got b={b}, c={c}, n={n}")
    from scipy.stats import norm
    z = float(norm.ppf(0.5 + confidence / 2))
    eps = 1e-9
    theta = (b - c) / n
    lows, highs = (-1 + eps, theta), (theta, 1 - eps)
    if anchored is not None and theta > 0:
        lows = (0.0, theta) if anchored else (-1 + eps, 0.0)
    if anchored is not None and theta < 0:
        highs = (theta, 0.0) if anchored else (0.0, 1 - eps)
    low = -1.0 if theta <= -1 + eps else _root(lambda t: _tango_z(b, c, n, t) - z, *lows)
    high = 1.0 if theta >= 1 - eps else _root(lambda t: _tango_z(b, c, n, t) + z, *highs)
    return low, high


def tango_lower(b: int, c: int, n: int, confidence: float = CONFIDENCE,
                anchor: float | None = None, reject: bool | None = None) -> float | None:
    """The one-sided ``confidence`` lower limit of theta (the non-inferiority test's: H0
    theta <= -delta is rejected at level 1 - confidence when this is above -delta).
    ``anchor`` with ``reject`` (whether the one-sided score test rejects theta0 = anchor):
    the anchor brackets the search, so the limit is above it exactly when it is rejected."""
    if anchor is None or reject is None or n <= 0 or not -1 < anchor < (b - c) / n:
        interval = tango_interval(b, c, n, 2 * confidence - 1)
        return None if interval is None else interval[0]
    from scipy.stats import norm
    z = float(norm.ppf(confidence))
    bracket = (anchor, (b - c) / n) if reject else (-1 + 1e-9, anchor)
    return _root(lambda t: _tango_z(b, c, n, t) - z, *bracket)


# -- a paired difference with few discordant pairs: an exact unconditional test -------------
#
# Tango's interval is asymptotic: with few discordant pairs its size is not guaranteed (b=0,
# c=5, n=180 gave an interval excluding zero beside an exact McNemar p of 0.0625). The exact
# test below is the one of Sidik (2003, Stat Med 22:265-278) for paired non-inferiority:
# the statistic is Tango's score z at theta0, its null distribution the multinomial of the
# n pairs, and the p-value the largest tail probability over the nuisance parameter, the
# discordant probability pi_d = pi_b + pi_c, on the boundary pi_b - pi_c = theta0 (the tail
# {z >= z_obs} grows with pi_b and shrinks with pi_c, so the supremum over the null lies on
# its boundary; the size checks in the tests enumerate interior points too). Berger and Boos
# (1994, JASA 89:1012-1016) restrict pi_d to its 1 - gamma Clopper-Pearson interval and add
# gamma to the p-value: still valid, much less conservative, and the grid over pi_d small.
# SciPy has no paired exact unconditional test (``barnard_exact``/``boschloo_exact`` are for
# two independent binomials, not matched pairs), so only its pmfs and betainc are used.
#
# The grid is conservative, not approximate: |dp/dpi_d| <= sqrt(p (1 - p) I(pi_d))
# (Cauchy-Schwarz on the score: dp/dpi_d is the covariance of the tail's indicator with it,
# I the Fisher information of the n pairs along the boundary) and sqrt(I) <= d Phi / d pi_d
# with Phi = sqrt(n) (2 sqrt(pi_b) + 2 sqrt(pi_c) - 2 sqrt(1 - pi_d)); so g = arcsin(sqrt(p))
# moves at most half as fast as Phi, and between grid points a and b g is at most
# (g(a) + g(b) + (Phi(b) - Phi(a)) / 2) / 2, the p-value at most sin^2 of that. On the
# arcsine scale a small p-value is bounded tightly by a coarse grid (p <= 1e-4 at both ends
# of a step of 0.025 in Phi: p <= 2.7e-4 between; on p's own scale, with |dp/dPhi| <= 1/2, the
# same step allows 6e-3), which is where deciding small p-values spent its time.
# The grid starts uniform in Phi (step 0.25) and an interval is halved while its bound is more
# than EXACT_SLACK (or a tenth of the p-value, when that is smaller) above the largest p-value
# on the grid, so the p-value returned is the supremum's upper bound and exceeds the grid's
# maximum by at most 0.001. Berger-Boos's gamma (1e-4) is the p-value's floor. The discordant
# totals outside the range summed add their whole probability (at most 2e-12). Every term
# errs upwards: the test stays valid, slightly conservative.

EXACT_BELOW = 50             # b + c below this: the exact test; from here on, Tango's
BERGER_BOOS_GAMMA = 1e-4     # the nuisance's restriction: also the p-value's floor (x2 two-sided)
EXACT_SLACK = 1e-3           # at most this added to a p-value by the grid (see above)
_TAIL = 1e-12                # discordant counts less likely than this are not summed
_TOL = 5e-5                  # a bound's bisection stops within this (0.005 points: tables show 0.01)


def _scores(b, c, n: int, theta0: float):
    """Tango's z (``_tango_z``) for arrays of counts b, c."""
    import numpy as np
    b, c = np.asarray(b, float), np.asarray(c, float)
    w = -b - c + (2 * n - b + c) * theta0
    q = (np.sqrt(np.maximum(0.0, w * w + 8 * n * c * theta0 * (1 - theta0))) - w) / (4 * n)
    variance = n * (2 * q + theta0 * (1 - theta0))
    numerator = b - c - n * theta0
    with np.errstate(divide="ignore", invalid="ignore"):
        z = numerator / np.sqrt(np.where(variance > 0, variance, np.nan))
        flat = np.where(numerator == 0, 0.0, np.sign(numerator) * np.inf)
    return np.where(variance > 0, z, flat)


def _nuisance_range(b: int, c: int, n: int, theta0: float, gamma: float) -> tuple[float, float]:
    """The values of pi_d searched: the boundary's [|theta0|, 1], within the 1 - gamma
    Clopper-Pearson interval of the observed discordant rate (Berger-Boos) when gamma > 0."""
    low, high = abs(theta0), 1.0
    if gamma > 0:
        from scipy.stats import beta
        m = b + c
        low = max(low, 0.0 if m == 0 else float(beta.ppf(gamma / 2, m, n - m + 1)))
        high = min(high, 1.0 if m == n else float(beta.isf(gamma / 2, m + 1, n - m)))
    return low, high


def exact_p_upper(b: int, c: int, n: int, theta0: float, gamma: float = BERGER_BOOS_GAMMA,
                  slack: float = EXACT_SLACK, versus: float | None = None) -> float:
    """One-sided p-value of H0 theta <= theta0 against H1 theta > theta0, theta = (pi_b -
    pi_c) the paired difference, b the pairs only the first is right on: the exact
    unconditional test (Sidik 2003; Berger-Boos's restriction when gamma > 0), an upper
    bound of its supremum over pi_d within ``slack`` (see the section's comment).
    ``versus`` (a level): stop as soon as the side of it the p-value lies on is known and
    return a value on that side (a bisection needs no more; the grid's bounds only tighten
    as it refines, so the side is the full computation's)."""
    import numpy as np
    from scipy.special import betainc, gammaln, xlog1py, xlogy
    from scipy.stats import binom
    if not -1 < theta0 < 1:
        raise ValueError(f"theta0 must be in (-1, 1); got {theta0!r}")
    low, high = _nuisance_range(b, c, n, theta0, gamma)
    if low > high:  # no null point is compatible with the discordant rate seen
        return min(1.0, gamma)
    # The discordant totals worth summing; what is left out is added whole.
    m_lo = int(binom.ppf(_TAIL, n, low)) if low > 0 else 0
    m_hi = int(binom.isf(_TAIL, n, high)) if high < 1 else n
    m_lo, m_hi = max(0, m_lo - 1), min(n, m_hi + 1)
    left_out = (float(binom.cdf(m_lo - 1, n, low)) if m_lo > 0 else 0.0) + \
        (float(binom.sf(m_hi, n, high)) if m_hi < n else 0.0)
    # The tail {z >= z_obs} for each discordant total m, as runs [start, end] of b'.
    observed = float(_scores(b, c, n, theta0)) - 1e-9  # ties count as extreme
    m_all = np.arange(m_lo, m_hi + 1)[:, None]
    b_all = np.arange(m_hi + 1)[None, :]
    valid = b_all <= m_all
    inside = valid & (_scores(b_all, np.where(valid, m_all - b_all, 0), n, theta0) >= observed)
    padded = np.diff(np.pad(inside.astype(np.int8), ((0, 0), (1, 1))), axis=1)
    rows, starts = np.nonzero(padded == 1)
    _, ends = np.nonzero(padded == -1)
    if len(rows) == 0:
        return min(1.0, left_out + gamma)
    ms, ends = m_all[rows, 0], ends - 1
    log_choose = gammaln(n + 1) - gammaln(ms + 1) - gammaln(n - ms + 1)
    cut = ends < ms  # a run that stops before b' = m (rare: the tail is usually b' >= k)

    def p_at(x):
        x = x[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.clip(np.where(x > 0, (x + theta0) / (2 * x), 0.5), 0.0, 1.0)
            weight = np.exp(log_choose + xlogy(ms, x) + xlog1py(n - ms, -x))
        inside = np.where(starts <= 0, 1.0,
                          betainc(np.maximum(starts, 1), np.maximum(ms - starts + 1, 1), q))
        if cut.any():
            inside = inside - np.where(cut, betainc(np.minimum(ends + 1, ms),
                                                    np.maximum(ms - ends, 1), q), 0.0)
        return np.clip((weight * inside).sum(axis=1), 0.0, 1.0)

    def phi(x):
        return 2 * np.sqrt(n) * (np.sqrt(np.maximum(x + theta0, 0) / 2)
                                 + np.sqrt(np.maximum(x - theta0, 0) / 2)
                                 - np.sqrt(np.maximum(1 - x, 0)))
    # Branch and bound over pi_d: a grid uniform in Phi, each interval's bound from g =
    # arcsin(sqrt(p)) (see the section's comment); intervals whose bound is more than
    # ``slack`` above the best point seen are halved until none is.
    def at_phi(values, a, z, steps):
        # Phi's inverse by bisection within [a, z] (Phi increases with pi_d). Where a point
        # lands only sets how fast the grid tightens, never what it bounds (the bounds use
        # Phi at the points themselves), so a split needs a few steps, not full precision;
        # the midpoint of the last bracket is strictly inside the interval split.
        for _ in range(steps):
            mid = (a + z) / 2
            below = phi(mid) < values
            a, z = np.where(below, mid, a), np.where(below, z, mid)
        return (a + z) / 2
    ends_phi = float(phi(np.array(low))), float(phi(np.array(high)))
    count = max(2, int(math.ceil((ends_phi[1] - ends_phi[0]) / 0.25)) + 1)
    first = at_phi(np.linspace(*ends_phi, count)[1:-1], np.full(count - 2, low),
                   np.full(count - 2, high), 30)
    xs = np.unique(np.concatenate(([low, high], first)))
    ps = p_at(xs)
    for _ in range(40):
        if len(xs) < 2:
            return min(1.0, float(ps.max()) + left_out + gamma)
        ph = phi(xs)
        g = np.arcsin(np.sqrt(ps))
        bound = np.sin(np.minimum((g[:-1] + g[1:] + np.diff(ph) / 2) / 2, np.pi / 2)) ** 2
        best = float(ps.max())
        if versus is not None:
            if best + left_out + gamma >= versus:
                return min(1.0, best + left_out + gamma)
            if float(bound.max()) + left_out + gamma < versus:
                return float(bound.max()) + left_out + gamma
        # A small p-value is refined to a tenth of itself (a p of 1e-4 is not reported as
        # 1e-3), a large one to ``slack``.
        live = bound > best + min(slack, max(1e-6, 0.1 * best))
        if versus is not None:
            # Deciding a side: an interval whose bound cannot reach the level cannot change
            # the decision, so it is left as it is (the decision is the full computation's:
            # a bound only tightens as its interval is halved).
            live &= bound + left_out + gamma >= versus
        if not live.any():
            return min(1.0, max(best, float(bound.max())) + left_out + gamma)
        new = at_phi((ph[:-1][live] + ph[1:][live]) / 2, xs[:-1][live], xs[1:][live], 8)
        new = new[~np.isin(new, xs)]
        if len(new) == 0:  # the Phi inversion cannot split further: take the bound
            return min(1.0, float(bound.max()) + left_out + gamma)
        xs = np.concatenate([xs, new])
        ps = np.concatenate([ps, p_at(new)])
        order = np.argsort(xs)
        xs, ps = xs[order], ps[order]
    return min(1.0, float(bound.max()) + left_out + gamma)


def _bound(rejected, low: float, high: float, anchor: float | None) -> float:
    """The lower confidence bound: the smallest theta0 not rejected, by bisection between a
    rejected ``low`` and a kept ``high``. The ``anchor`` (0 for a table, -margin for a
    certificate) is decided first and brackets the search, so the bound lies above it exactly
    when the test rejects it: the interval and the p-value at the anchor never disagree."""
    if anchor is not None and low < anchor < high:
        if rejected(anchor):
            low = anchor
        else:
            high = anchor
    while high - low > _TOL:
        mid = (low + high) / 2
        if rejected(mid):
            low = mid
        else:
            high = mid
    return high


def exact_lower(b: int, c: int, n: int, level: float, anchor: float | None = None,
                gamma: float = BERGER_BOOS_GAMMA) -> float:
    """The exact one-sided lower confidence bound of theta at ``level`` (e.g. 0.95): the
    smallest theta0 whose one-sided exact test (``exact_p_upper``) does not reject at
    1 - level."""
    alpha = 1 - level
    theta = (b - c) / n
    eps = 1e-9
    low, high = -1 + eps, min(1 - eps, max(theta, -1 + 2 * eps))

    def rejected(t):
        return exact_p_upper(b, c, n, t, gamma, versus=alpha) < alpha
    while rejected(high) and high < 1 - eps:  # the estimate itself is kept in practice
        high = min(1 - eps, high + 0.05)
    # Start near Tango's limit (the exact one is close below it): fewer bisection steps.
    guess = tango_lower(b, c, n, level)
    if guess is not None and low < guess - 0.02 < high and rejected(guess - 0.02):
        low = guess - 0.02
    elif not rejected(low):
        return -1.0
    return _bound(rejected, low, high, anchor)


def exact_interval(b: int, c: int, n: int, confidence: float = CONFIDENCE
                   ) -> tuple[float, float]:
    """The two-sided exact interval: the two one-sided bounds at (1 + confidence) / 2, each
    anchored at 0 (it excludes zero exactly when ``exact_p_two_sided`` < 1 - confidence)."""
    level = (1 + confidence) / 2
    return (exact_lower(b, c, n, level, anchor=0.0),
            -exact_lower(c, b, n, level, anchor=0.0))


# A reported exact p-value is at most this much above the test's: 2%, or 2.5e-4 (the p-values
# of 1e-4 to 1e-3 the tables read as < 0.001). Deciding a level within a hair of the p-value
# costs as much as the hair is thin: a p of 1.01e-4 (near its floor, gamma) decided at 1.02
# times itself took 14 s, at twice itself 1 s.
P_RELATIVE = 1.02
P_ABSOLUTE = 2.5e-4


def exact_p_decided(b: int, c: int, n: int, theta0: float, level: float) -> float:
    """The one-sided exact p-value (``exact_p_upper``) found by bisection over levels, each
    decided by the test's early exit (``versus``), within ``P_RELATIVE`` (or ``P_ABSOLUTE``)
    above it; decided
    at ``level`` first, so it lies on the side of ``level`` the test's decision there does
    (the interval's anchor asks the same question: they never disagree). Refining the
    supremum itself to a small p's precision took seconds a row (a 30-variant page, minutes);
    ten early-exit decisions take a fraction of one."""
    def below(a: float) -> bool:
        return exact_p_upper(b, c, n, theta0, versus=a) < a
    if below(level):
        # BERGER_BOOS_GAMMA is added to every p-value: none is below it.
        low, high, at_level = BERGER_BOOS_GAMMA, level, True
    else:
        low, high, at_level = level, 1.0, False
    while high - low > max(P_ABSOLUTE, (P_RELATIVE - 1) * low):
        mid = math.sqrt(low * high)
        if below(mid):
            high = mid
        else:
            low = mid
    if at_level and high >= level:  # below the level, though within P_RELATIVE of it
        return math.nextafter(level, 0.0)
    return min(1.0, high)


def exact_p_two_sided(b: int, c: int, n: int, confidence: float = CONFIDENCE) -> float:
    """Twice the smaller one-sided exact p-value at theta0 = 0 (the two tails of the same
    test whose bounds make ``exact_interval``): the side the estimate leans to, decided at
    that bound's level so p < 1 - confidence exactly when the interval excludes zero."""
    first, second = (b, c) if b >= c else (c, b)  # the other side's p-value is the larger
    return min(1.0, 2 * exact_p_decided(first, second, n, 0.0, (1 - confidence) / 2))


def tango_p_two_sided(b: int, c: int, n: int) -> float:
    """The two-sided p-value of Tango's score test at theta0 = 0 (there it is McNemar's
    uncorrected z, (b - c) / sqrt(b + c)): the p-value of the test ``tango_interval``
    inverts. 1.0 when no pair differs."""
    if b + c == 0:
        return 1.0
    from scipy.stats import norm
    return float(min(1.0, 2 * norm.sf(abs(b - c) / math.sqrt(b + c))))
