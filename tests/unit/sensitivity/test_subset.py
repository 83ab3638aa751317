"""The screening subset: stratified, its indices fixed by the seed; and which cells are
confirmed on the whole split."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.sensitivity.subset import stratified_subset, to_confirm

# An unbalanced split of 3 classes: 50, 30 and 20 examples, interleaved.
LABELS = [0] * 50 + [1] * 30 + [2] * 20
LABELS = [LABELS[(i * 37) % 100] for i in range(100)]


def test_the_indices_are_fixed_by_the_seed():
    first = stratified_subset(LABELS, 0.3, seed=7)
    assert first == stratified_subset(LABELS, 0.3, seed=7)
    assert first != stratified_subset(LABELS, 0.3, seed=8)
    assert first == sorted(first) and len(set(first)) == len(first)


@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.5, 0.9])
def test_each_class_gives_its_share(fraction):
    picked = stratified_subset(LABELS, fraction, seed=0)
    assert len(picked) == round(fraction * len(LABELS))
    counts, totals = Counter(LABELS[i] for i in picked), Counter(LABELS)
    for label, total in totals.items():
        assert abs(counts[label] - fraction * total) < 1, (label, counts)


def test_a_tiny_fraction_still_draws_every_class_and_one_is_everything():
    assert {LABELS[i] for i in stratified_subset(LABELS, 0.01, seed=0)} == {0, 1, 2}
    assert stratified_subset(LABELS, 1.0, seed=3) == list(range(100))
    with pytest.raises(ValueError, match="in \\(0, 1\\]"):
        stratified_subset(LABELS, 0.0, seed=0)


def test_the_most_and_least_sensitive_cells_are_confirmed_once_each():
    rows = [{"accuracy_change": c} for c in (-5.0, 0.0, 1.0, -0.5, None, 2.0)]
    rows[4] = {"accuracy_change": None, "error": "failed"}
    assert to_confirm(rows, 1) == [0, 5]
    assert to_confirm(rows, 2) == [0, 2, 3, 5]
    assert to_confirm(rows, 10) == [0, 1, 2, 3, 5]
    assert to_confirm(rows, 0) == []
