"""The one least-recently-used rule the weights cache and the exports share (issue 33.4)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.spec.lru import least_recently_used


def test_the_oldest_go_first_until_the_rest_fit_and_the_new_one_stays():
    a, b, c, d = (Path(n) for n in "abcd")
    entries = [(3.0, 40, c), (1.0, 30, a), (4.0, 50, d), (2.0, 20, b)]  # 140 bytes in all
    assert least_recently_used(entries, 140) == []
    assert least_recently_used(entries, 100) == [a, b]  # 30 + 20 off: 90 left
    # The entry just written is kept even when it is the oldest; the next go instead.
    assert least_recently_used(entries, 100, keep=a) == [b, c]
    assert least_recently_used(entries, 0, keep=d) == [a, b, c]
