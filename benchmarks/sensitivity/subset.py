"""Cost control: every cell screened on a fixed stratified subset of the evaluation split,
the most and least sensitive confirmed on all of it.

The subset takes the same fraction of every class (proportional allocation, the remainders
given out by largest fraction so the total is the asked share), drawn by a seed and kept in
the split's order. With proportional allocation every example is drawn with the same
probability, so a cell's paired accuracy change on the subset is an unbiased estimate of its
change on the whole split; the strata only remove the variance a class imbalance in the draw
would add. Torch-free.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence


def stratified_subset(labels: Sequence[int], fraction: float, seed: int) -> list[int]:
    """Indices into the split (sorted): ``fraction`` of each class, at least one, drawn by
    ``seed``. The same labels, fraction and seed give the same indices in every process."""
    if not 0 < fraction <= 1:
        raise ValueError(f"a subset's fraction must be in (0, 1]; got {fraction!r}")
    by_class: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        by_class.setdefault(int(label), []).append(i)
    if fraction == 1:
        return list(range(len(labels)))
    target = max(len(by_class), round(fraction * len(labels)))
    exact = {c: fraction * len(idx) for c, idx in by_class.items()}
    counts = {c: max(1, math.floor(v)) for c, v in exact.items()}
    # Largest remainders first (ties by class), until the subset has its share.
    for c in sorted(exact, key=lambda c: (-(exact[c] - math.floor(exact[c])), c)):
        if sum(counts.values()) >= target:
            break
        if counts[c] < len(by_class[c]):
            counts[c] += 1
    rng = random.Random(seed)
    chosen: list[int] = []
    for c in sorted(by_class):
        chosen += rng.sample(by_class[c], counts[c])
    return sorted(chosen)


def to_confirm(rows: list[dict], k: int) -> list[int]:
    """Positions of the ``k`` most and ``k`` least sensitive measured cells (by accuracy
    change; ties by position), each once: what is measured again on the whole split."""
    measured = [i for i, r in enumerate(rows) if r.get("accuracy_change") is not None]
    if k <= 0 or not measured:
        return []
    ranked = sorted(measured, key=lambda i: (rows[i]["accuracy_change"], i))
    picked = ranked[:k] + ranked[::-1][:k]
    return sorted(set(picked))
