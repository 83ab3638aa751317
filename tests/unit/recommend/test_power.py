"""What a data set can certify, said before a job is submitted (the Recommend panel's
statement and its fixes), from the registry's test sizes alone: the same arithmetic as the
refusal the job and the CLI give once the data is loaded."""

from __future__ import annotations

import pytest

from benchmarks.recommend.power import (
    certifiable_pts,
    certify_size,
    check_power,
    data_power,
    embedded_that_certifies,
    refusal,
    typical_margin_pts,
)
from benchmarks.recommend.split import make_split
from benchmarks.spec.datasets import dataset_entries


def test_the_certify_split_before_loading_is_the_one_the_job_cuts():
    for entry in dataset_entries():
        if entry.test_examples:
            for fraction in (0.1, 0.5, 0.9):
                assert certify_size(entry.name, fraction) == len(
                    make_split(entry.test_examples, 7, fraction).certify)
    assert certify_size("mnist5k", 0.5) == 1250 and certify_size("digits", 0.5) == 180
    assert certify_size("imagefolder:/nowhere", 0.5) is None


def test_mnist5k_certifies_1pt_for_a_candidate_that_differs_on_1_in_30_and_digits_cannot():
    # The bar: about 900 certify examples for 1 point at 1 in 30 discordant.
    assert typical_margin_pts(certify_size("mnist5k", 0.5), 0.95) <= 1.0
    big = data_power("mnist5k", "1pt", 0.95, 0.5)
    assert not big.refused and not big.typical_fails
    assert big.sentence() == (f"On mnist5k, the certify split of 1,250 test images can "
                              f"certify 1pt: a candidate that differs from the baseline on 1 "
                              f"in 30 examples needs {typical_margin_pts(1250, 0.95):g} points "
                              f"(one that agrees on every example, "
                              f"{certifiable_pts(1250, 0.95):g}).")
    small = data_power("digits", "1pt", 0.95, 0.5)
    assert small.refused and small.typical_fails
    # The page's sentence is the CLI's refusal without its flag.
    assert small.sentence() == f"On digits, {refusal(1.0, 180, 0.95)}."
    with pytest.raises(ValueError) as caught:
        check_power(1.0, 180, 0.95)
    assert str(caught.value).startswith(refusal(1.0, 180, 0.95) + "; ")
    assert "--" not in small.sentence() and "--" not in big.sentence()


def test_between_the_best_case_and_a_typical_candidate_it_warns_without_refusing():
    middle = data_power("digits", "2pt", 0.95, 0.5)
    assert not middle.refused and middle.typical_fails
    assert "only for a candidate that agrees with the baseline on nearly every example; " \
           f"one that differs on 1 in 30 needs {typical_margin_pts(180, 0.95):g} points" in \
           middle.sentence()
    # A relative margin is judged at its largest (a baseline at 100%), as the job does first.
    assert data_power("digits", "2%", 0.95, 0.5).margin_pts == 2.0
    # Unknown until the folder is read: nothing refused before, the job checks it.
    folder = data_power("imagefolder:/nowhere", "1pt", 0.95, 0.5)
    assert not folder.refused and not folder.typical_fails and "once" in folder.sentence()
    assert "/nowhere" not in folder.sentence()  # the server's path is not the page's to say
    with pytest.raises(ValueError, match="--within must be a margin"):
        data_power("digits", "-1pt", 0.95, 0.5)


@pytest.mark.parametrize("within, larger", [("1pt", "mnist5k"), ("3pt", "digits"),
                                            ("0.5pt", None)])
def test_the_one_click_switch_is_the_smallest_embedded_set_that_certifies(within, larger):
    assert embedded_that_certifies(within, 0.95, 0.5) == larger
