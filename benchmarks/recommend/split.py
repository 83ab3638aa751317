"""The test examples split once, by a recorded seed, into a *search* split that guides the
search and a *certify* split that judges its candidates once, after it.

Every variant is scored on the whole test split and keeps one correctness bit per example
(``VariantResult.correct_bits``); the search reads only the bits at ``search`` indices, the
certificate only those at ``certify`` indices. No build sees the test split at all (training,
fine-tuning, distillation and calibration draw the training split; the timed batch is test
inputs without their labels, used for shapes and timing alone), so the certify split is as
unseen by what chose a candidate as a fresh data set of its size. Torch-free.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from benchmarks.report.stats import unpack_bits


@dataclass(frozen=True)
class Split:
    seed: int
    n: int                          # test examples in all
    search: tuple[int, ...]         # indices into the test split, ascending
    certify: tuple[int, ...]

    def __post_init__(self):
        both = set(self.search) | set(self.certify)
        if set(self.search) & set(self.certify):
            raise ValueError("the search and certify splits overlap")
        if len(both) != len(self.search) + len(self.certify) or both != set(range(self.n)):
            raise ValueError(f"the splits must cover the {self.n} test examples once each")
        if not self.search or not self.certify:
            raise ValueError(f"{self.n} test examples cannot be split into a search and a "
                             f"certify split; the data set needs more test examples")

    def card(self) -> dict:
        """What the environment card says of it: the seed and the sizes."""
        return {"seed": self.seed, "test_examples": self.n, "search_size": len(self.search),
                "certify_size": len(self.certify),
                "certify_fraction": round(len(self.certify) / self.n, 6)}

    def to_dict(self) -> dict:
        return {**self.card(), "search": list(self.search), "certify": list(self.certify)}

    @classmethod
    def from_dict(cls, data: dict) -> "Split":
        return cls(int(data["seed"]), int(data["test_examples"]), tuple(data["search"]),
                   tuple(data["certify"]))


def make_split(n: int, seed: int, certify_fraction: float) -> Split:
    """A seeded random permutation of the n test examples, its first ``certify_fraction``
    (rounded) certifying, the rest searching: the same seed, the same split."""
    if n < 2:
        raise ValueError(f"{n} test example(s) cannot be split into a search and a certify "
                         f"split; the data set needs more test examples")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    k = min(n - 1, max(1, round(certify_fraction * n)))
    return Split(seed, n, tuple(sorted(order[k:])), tuple(sorted(order[:k])))


def bits_at(bits: str, n: int, indices) -> list[bool]:
    """The correctness bits of the examples at ``indices`` (in their order)."""
    every = unpack_bits(bits, n)
    return [every[i] for i in indices]


def accuracy_at(bits: str | None, n: int | None, indices) -> float | None:
    """Accuracy on the examples at ``indices`` from a variant's stored bits (None without)."""
    if not bits or not n or not indices:
        return None
    picked = bits_at(bits, n, indices)
    return sum(picked) / len(picked)


def discordant_at(candidate_bits: str, baseline_bits: str, n: int, indices) -> tuple[int, int]:
    """(b, c) on ``indices``: b the examples only the candidate gets right, c those only the
    baseline does."""
    mine, base = bits_at(candidate_bits, n, indices), bits_at(baseline_bits, n, indices)
    b = sum(1 for x, y in zip(mine, base) if x and not y)
    c = sum(1 for x, y in zip(mine, base) if y and not x)
    return b, c
