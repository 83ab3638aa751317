"""Which multiple-testing procedure the certificate ships, by simulation (developer tooling).

Every procedure of ``benchmarks.recommend.procedures`` runs on the same simulated certificates:
a front of candidates, each with a true accuracy change and a share of examples on which it
and the baseline differ; a test split drawn anew per simulation and split into a search half
(whose p-values at the margin set the order, as ``sequence.search_p`` does) and a certify half
(where the procedure decides, with the product's own tests, ``stats.noninferiority_rejects``).

- ``fwer``: every candidate's true change exactly at -margin (the least favourable null): the
  share of simulations that certified any candidate, with its Monte Carlo 95% upper bound.
- ``power``: on realistic fronts, the mean speed-up of the winner (the fastest certified; 1
  with none) and the share that certified the fastest candidate within the margin.

``python -m tools.procedures`` prints the power table docs/methodology.md quotes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from benchmarks.recommend.certificate import ORDER_DIGITS
from benchmarks.recommend.procedures import PROCEDURES, certify_with
from benchmarks.report import stats


@dataclass(frozen=True)
class Arm:
    """One candidate: its speed-up, its true accuracy change (points) and the share of
    examples on which it and the baseline differ."""
    speedup: float
    change_pts: float
    differ: float

    def cells(self) -> tuple[float, float]:
        """(P(only it right), P(only the baseline right))."""
        theta = self.change_pts / 100
        return (self.differ + theta) / 2, (self.differ - theta) / 2


# Realistic fronts (margin 1 point, 1,250 + 1,250 examples, as mnist5k's split).
FRONTS = {
    # issue 44's mnist5k front after the not-faster filter: INT8 nearly lossless, the
    # distilled students fast and lossy to varying degrees.
    "mnist5k's defaults": (Arm(1.67, -0.08, 0.005), Arm(3.19, -0.08, 0.005),
                           Arm(9.04, -0.64, 0.01), Arm(13.76, -0.24, 0.014),
                           Arm(14.49, -0.56, 0.012)),
    # a slow lossy candidate before fast lossless ones (the speed order's trap)
    "a slow lossy one first": (Arm(1.5, -1.5, 0.02), Arm(3.0, 0.0, 0.004),
                               Arm(10.0, 0.0, 0.006)),
    # speed and loss rising together
    "speed and loss together": (Arm(2.0, 0.0, 0.004), Arm(4.0, -0.2, 0.008),
                                Arm(8.0, -0.4, 0.012), Arm(16.0, -0.6, 0.016),
                                Arm(32.0, -1.2, 0.02)),
}


def _draw(rng, arm: Arm, n: int) -> tuple[int, int]:
    """(b, c) of ``n`` examples: each example only-it-right, only-baseline-right or neither
    (a multinomial draw)."""
    pb, pc = arm.cells()
    b, c, _ = rng.multinomial(n, [pb, pc, 1 - pb - pc])
    return int(b), int(c)


def _p(b: int, c: int, n: int, margin: float) -> float:
    return stats.noninferiority_p(b, c, n, margin)


def order(search: list[tuple[int, int]], arms, n: int, margin: float) -> list[int]:
    """The candidates' indices most likely to pass first (``certificate.order_by_search``'s
    rule on simulated counts)."""
    def key(i):
        p = _p(*search[i], n, margin)
        return (float(f"{p:.{ORDER_DIGITS}g}"), -arms[i].speedup, i)
    return sorted(range(len(arms)), key=key)


def simulate(arms, procedure: str, *, n: int = 1250, margin_pts: float = 1.0,
             alpha: float = 0.05, runs: int = 2000, seed: int = 0) -> dict:
    """{"fwer", "fwer_upper", "speedup", "found_best", "runs"} of ``procedure`` on ``arms``
    (``n`` search and ``n`` certify examples)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    margin = margin_pts / 100
    null = [a.change_pts <= -margin_pts for a in arms]
    good = [i for i, a in enumerate(arms) if not null[i]]
    best = max(good, key=lambda i: arms[i].speedup) if good else None
    errors = found = 0
    speed = 0.0
    for _ in range(runs):
        search = [_draw(rng, a, n) for a in arms]
        certify = [_draw(rng, a, n) for a in arms]
        sequence = order(search, arms, n, margin)
        rejects = [(lambda b, c: lambda level: stats.noninferiority_rejects(
            b, c, n, margin, level))(*certify[i]) for i in sequence]
        rejected, _ = certify_with(procedure, rejects, alpha)
        won = [sequence[j] for j, r in enumerate(rejected) if r]
        errors += any(null[i] for i in won)
        speed += max((arms[i].speedup for i in won), default=1.0)
        found += best is not None and best in won
    share = errors / runs
    # The Clopper-Pearson upper limit of the error rate at 95%.
    from scipy.stats import beta
    upper = 1.0 if errors == runs else float(beta.ppf(0.95, errors + 1, runs - errors))
    return {"fwer": share, "fwer_upper": upper, "speedup": speed / runs,
            "found_best": found / runs, "runs": runs}


def at_the_margin(k: int = 4, differ: float = 0.03) -> tuple[Arm, ...]:
    """``k`` candidates whose true change is exactly -margin (1 point): every certification
    is an error."""
    return tuple(Arm(2.0 + i, -1.0, differ) for i in range(k))


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else 400
    print(f"| front | {' | '.join(PROCEDURES)} |")
    print("|---|" + "---|" * len(PROCEDURES))
    for name, arms in FRONTS.items():
        cells = []
        for procedure in PROCEDURES:
            found = simulate(arms, procedure, runs=runs)
            cells.append(f"{found['speedup']:.2f}x ({100 * found['found_best']:.0f}%)")
        print(f"| {name} | {' | '.join(cells)} |")
    cells = []
    for procedure in PROCEDURES:  # the error rate's bound needs more runs than the power
        found = simulate(at_the_margin(), procedure, runs=max(runs, 4000), seed=1)
        cells.append(f"{100 * found['fwer']:.1f}% (<= {100 * found['fwer_upper']:.1f}%)")
    print(f"| every candidate at the margin: family-wise error | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
