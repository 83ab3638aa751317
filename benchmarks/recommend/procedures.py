"""Multiple testing over the certificate's candidates: which of them a procedure certifies
while the chance of certifying any candidate that in truth breaks a risk stays at most alpha
(the family-wise error, in the strong sense: whatever the candidates' true losses).

Every procedure here is a graphical procedure (Bretz, Maurer, Brannath and Posch 2009, Stat
Med 28:586-604): each hypothesis "candidate i breaks a risk" holds a share ``w_i`` of alpha and
is tested at ``w_i * alpha``; a rejected hypothesis passes its share along the graph's edges
(``g_ij``), and the graph is updated, until no hypothesis can be rejected at the level it
holds. The procedures the product names are graphs over the candidates in their order:

- ``fixed-sequence``: all of alpha on the first, each passing it whole to the next; the first
  failure ends it (what the certificate did before the fifth wave).
- ``fallback`` (Wiens 2003, Stat Med 22:1085-1097): shares spread over the order, each passing
  its level to the next; a failure keeps its own share, and the candidates after it are still
  tested at theirs.
- ``holm``: equal shares, each passing its share equally to every other.
- ``graphical``: the fallback's chain with most of alpha on the first (``LEAD``) and the last
  passing its level back to the first, so no share is lost once the chain reaches the end.

Which one ships (``SHIPPED``) was chosen by simulated power on realistic fronts
(``tools/procedures.py``; docs/methodology.md has its table); a Monte Carlo test shows each
keeps the family-wise error at alpha. The rejections of a graphical procedure do not depend on
the order they are found in (Bretz et al., section 2.2), so ``run`` takes the first rejectable
in the candidates' order. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

PROCEDURES = ("fixed-sequence", "fallback", "holm", "graphical")
SHIPPED = "graphical"
# The graphical procedure's share on the first candidate (the one most likely to pass): the
# rest is spread evenly over the others. Chosen with the procedure (tools/procedures.py).
LEAD = 0.8

DESCRIPTIONS = {
    "fixed-sequence": "tested in order at the full alpha, stopping at the first failure",
    "fallback": "tested in order, each at its share of alpha plus what the one before it "
                "passed on; a failure keeps its share and the order goes on (Wiens 2003)",
    "holm": "each at an equal share of alpha, a certified one's share spread over the rest "
            "(Holm 1979)",
    "graphical": f"tested in order, the first at {LEAD:.0%} of alpha and the others at equal "
                 f"shares of the rest, a certified one passing its level to the next and the "
                 f"last back to the first; a failure keeps its share and the order goes on "
                 f"(Bretz et al. 2009)",
}


@dataclass(frozen=True)
class Graph:
    """Initial shares of alpha (summing to at most 1) and the transitions between
    hypotheses (each row summing to at most 1, zero on the diagonal)."""
    weights: tuple[float, ...]
    transitions: tuple[tuple[float, ...], ...]

    def __post_init__(self):
        k = len(self.weights)
        if any(w < 0 for w in self.weights) or sum(self.weights) > 1 + 1e-12:
            raise ValueError(f"a graph's weights must be >= 0 and sum to at most 1; got "
                             f"{self.weights}")
        if len(self.transitions) != k or any(len(row) != k for row in self.transitions):
            raise ValueError(f"a graph over {k} hypotheses needs a {k}x{k} transition matrix")
        for i, row in enumerate(self.transitions):
            if row[i] != 0 or any(g < 0 for g in row) or sum(row) > 1 + 1e-12:
                raise ValueError(f"transition row {i} must be >= 0, zero on the diagonal and "
                                 f"sum to at most 1; got {row}")


def graph(procedure: str, k: int) -> Graph:
    """The named procedure's graph over ``k`` hypotheses in their order."""
    if procedure not in PROCEDURES:
        raise ValueError(f"procedure must be one of {', '.join(PROCEDURES)}; got "
                         f"{procedure!r}")
    if k == 0:
        return Graph((), ())
    zero = [[0.0] * k for _ in range(k)]
    if procedure == "holm":
        weights = [1 / k] * k
        rows = [[0.0 if j == i else 1 / (k - 1) for j in range(k)] for i in range(k)] \
            if k > 1 else zero
        return Graph(tuple(weights), tuple(map(tuple, rows)))
    if procedure == "fixed-sequence":
        weights = [1.0] + [0.0] * (k - 1)
    elif procedure == "fallback":
        weights = [1 / k] * k
    else:
        weights = [1.0] if k == 1 else [LEAD] + [(1 - LEAD) / (k - 1)] * (k - 1)
    rows = zero
    for i in range(k - 1):
        rows[i][i + 1] = 1.0
    if procedure == "graphical" and k > 1:
        rows[k - 1][0] = 1.0
    return Graph(tuple(weights), tuple(map(tuple, rows)))


def run(g: Graph, rejects: Sequence[Callable[[float], bool]], alpha: float
        ) -> tuple[list[bool], list[float]]:
    """(which hypotheses are rejected, the level each was last tested at): Bretz et al.'s
    algorithm 1. ``rejects[i](level)`` says whether hypothesis i's test rejects at ``level``
    (a decision, not a p-value: an exact test's p-value is only known to a few percent, its
    decision at a level exactly)."""
    k = len(g.weights)
    if len(rejects) != k:
        raise ValueError(f"{len(rejects)} tests for a graph over {k} hypotheses")
    weights = list(g.weights)
    moves = [list(row) for row in g.transitions]
    open_ = list(range(k))
    rejected = [False] * k
    levels = [w * alpha for w in weights]
    while True:
        found = None
        for i in open_:
            levels[i] = weights[i] * alpha
            if weights[i] > 0 and rejects[i](levels[i]):
                found = i
                break
        if found is None:
            return rejected, levels
        rejected[found] = True
        open_.remove(found)
        i = found
        new_weights, new_moves = list(weights), [row[:] for row in moves]
        for j in open_:
            new_weights[j] = weights[j] + weights[i] * moves[i][j]
            for m in open_:
                if m == j:
                    continue
                denominator = 1 - moves[j][i] * moves[i][j]
                new_moves[j][m] = ((moves[j][m] + moves[j][i] * moves[i][m]) / denominator
                                   if denominator > 1e-12 else 0.0)
        new_weights[i] = 0.0
        for j in range(k):
            new_moves[j][i] = new_moves[i][j] = 0.0
        weights, moves = new_weights, new_moves


def certify_with(procedure: str, rejects: Sequence[Callable[[float], bool]], alpha: float
                 ) -> tuple[list[bool], list[float]]:
    """``run`` with the named procedure's graph over the hypotheses in their order."""
    return run(graph(procedure, len(rejects)), rejects, alpha)
