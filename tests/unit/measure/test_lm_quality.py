"""A language model's quality paired with its baseline on the same tokens (tiny-lm, seconds):
perplexity as cross-entropy says, the NLL change with a seeded bootstrap over windows, top-1
accuracy and agreement per window, KL's mean and p99, whatever the batch size."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from benchmarks.measure.lm_quality import (PairedOutcomes, WindowOutcomes,
                                           bootstrap_ratio_interval, discordant_windows,
                                           evaluate, evaluate_pair)
from benchmarks.zoo.lm import build_lm
from benchmarks.zoo.text import WindowSpec, load_text_windows


@pytest.fixture(scope="module")
def lm():
    return build_lm("tiny-lm")


@pytest.fixture(scope="module")
def data(lm):
    w = load_text_windows("text", lm.tokenizer, lm.context, lm.name, WindowSpec(48, 32),
                          max_windows=16)
    return w.ids, w.scored  # overlapping: later windows score their last 32 predictions


@pytest.fixture(scope="module")
def noisy(lm):
    """tiny-lm with every weight matrix nudged: a variant that is close but not equal."""
    variant = copy.deepcopy(lm.model)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in variant.parameters():
            if p.dim() == 2:
                p.add_(torch.randn(p.shape, generator=g) * 0.3 * p.std())
    return variant


def test_perplexity_is_cross_entropy_over_the_scored_tokens(lm, data):
    ids, scored = data
    out = evaluate(lm.model, ids, scored)
    with torch.inference_mode():
        logits = lm.model(input_ids=ids).logits[:, :-1]
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                            ids[:, 1:].reshape(-1), reduction="none")
    mask = scored.reshape(-1)
    assert out.tokens.sum() == int(mask.sum()) < ids.numel()  # the context is not scored
    assert out.mean_nll == pytest.approx(float(nll[mask].mean()), rel=1e-5)
    assert out.perplexity == pytest.approx(math.exp(float(nll[mask].mean())), rel=1e-5)
    hits = (logits.argmax(-1) == ids[:, 1:]).reshape(-1)[mask]
    assert out.accuracy == pytest.approx(float(hits.float().mean()))
    summary = out.summary()
    lo, hi = summary["perplexity_interval"]
    assert lo < summary["perplexity"] < hi


def test_a_model_against_itself_changes_nothing(lm, data):
    ids, scored = data
    s = evaluate_pair(lm.model, lm.model, ids, scored).summary()
    assert s["delta_nll"] == 0 and s["delta_nll_interval"] == [0.0, 0.0]
    assert s["nll_within_noise"] and s["perplexity_ratio"] == 1
    assert s["agreement"] == 1 and s["delta_accuracy"] == 0
    assert s["kl_mean"] == pytest.approx(0, abs=1e-6) and s["kl_p99"] == pytest.approx(0, abs=1e-6)
    assert s["windows_variant_better"] == s["windows_baseline_better"] == 0
    assert s["bootstrap"]["over"] == "windows"


def test_a_changed_variant_is_paired_on_the_same_tokens(lm, data, noisy):
    ids, scored = data
    paired = evaluate_pair(lm.model, noisy, ids, scored)
    alone = evaluate(noisy, ids, scored)
    np.testing.assert_allclose(paired.variant.nll, alone.nll, rtol=1e-6)
    np.testing.assert_array_equal(paired.variant.correct, alone.correct)
    s = paired.summary()
    assert s["kl_mean"] > 0 and s["kl_p99"] >= s["kl_mean"]
    assert s["agreement"] < 1
    assert s["delta_nll"] == pytest.approx(alone.mean_nll - paired.baseline.mean_nll, rel=1e-6)
    lo, hi = s["delta_nll_interval"]
    assert lo <= s["delta_nll"] <= hi and lo < hi
    assert s["perplexity_ratio"] == pytest.approx(s["variant"]["perplexity"]
                                                  / s["baseline"]["perplexity"], rel=1e-6)
    # Seeded: the same outcomes give the same intervals, another seed other ones.
    assert paired.summary() == s
    assert paired.summary(seed=7)["delta_nll_interval"] != s["delta_nll_interval"]
    # The stored per-window outcomes recompute every figure.
    assert PairedOutcomes.from_dict(paired.to_dict()).summary() == s
    better, worse = discordant_windows(paired)
    diff = paired.variant.correct - paired.baseline.correct
    assert (better, worse) == (int((diff > 0).sum()), int((diff < 0).sum()))


def test_the_batch_size_changes_no_figure(lm, data, noisy):
    ids, scored = data[0][:7], data[1][:7]
    whole = evaluate_pair(lm.model, noisy, ids, scored).summary()
    for batch in (1, 5):
        other = evaluate_pair(lm.model, noisy, ids, scored, batch_size=batch).summary()
        assert other["delta_nll"] == pytest.approx(whole["delta_nll"], rel=1e-5, abs=1e-7)
        assert other["kl_mean"] == pytest.approx(whole["kl_mean"], rel=1e-4)
        assert other["agreement"] == whole["agreement"] and other["tokens"] == whole["tokens"]
    assert evaluate(lm.model, ids, scored, batch_size=3).perplexity == pytest.approx(
        whole["baseline"]["perplexity"], rel=1e-5)


def test_the_bootstrap_is_over_windows_and_hand_checkable():
    # Every window's ratio is 0.5: every resample's is too.
    assert bootstrap_ratio_interval([1, 2, 3], [2, 4, 6]) == (0.5, 0.5)
    # Two windows, 0 and 1 of 1 token each: resamples give 0, 0.5 or 1 with odds 1:2:1, so
    # the 95% percentile interval is [0, 1] and a 40% one [0.5, 0.5].
    assert bootstrap_ratio_interval([0, 1], [1, 1]) == (0.0, 1.0)
    assert bootstrap_ratio_interval([0, 1], [1, 1], confidence=0.4) == (0.5, 0.5)
    # A ratio of sums: a 10-token window weighs ten times a 1-token one.
    lo, hi = bootstrap_ratio_interval([10, 0], [10, 1], resamples=4000)
    assert lo == 0.0 and hi == 1.0
    with pytest.raises(ValueError, match="one numerator and one denominator per window"):
        bootstrap_ratio_interval([1], [1, 2])


def test_unpaired_or_malformed_windows_are_refused(lm, data):
    ids, scored = data
    with pytest.raises(ValueError, match="must be \\(n, length\\) ids"):
        evaluate(lm.model, ids, scored[:, 1:])
    none = torch.zeros_like(scored)
    with pytest.raises(ValueError, match="every window must score at least one token"):
        evaluate(lm.model, ids, none)
    a = WindowOutcomes(np.ones(2), np.array([1, 2]), np.zeros(2, dtype=np.int64))
    b = WindowOutcomes(np.ones(2), np.array([1, 3]), np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="same tokens of the same windows"):
        PairedOutcomes(a, b, np.zeros(2, dtype=np.int64), np.zeros(2), 0.0)
