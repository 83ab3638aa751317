"""Cancel lands within a language model's long passes (issue 46): between batches of windows
while scoring, and between generations while timing, never inside a timed one."""

from __future__ import annotations

import pytest
import torch

from benchmarks.measure.lm_quality import evaluate, evaluate_pair
from benchmarks.measure.lm_speed import measure_lm_speeds
from benchmarks.spec.cancel import Cancelled

VOCAB = 11


class Counting:
    """A model of logits that counts its calls (a batch of windows is one)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, ids):
        self.calls += 1
        return torch.zeros(*ids.shape, VOCAB)


class Asked:
    """``should_stop``: False until asked ``after`` times."""

    def __init__(self, after: int):
        self.after, self.asked = after, 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.asked > self.after


def windows(n=40, length=8):
    ids = torch.randint(0, VOCAB, (n, length))
    return ids, torch.ones(n, length - 1, dtype=torch.bool)


def test_scoring_stops_between_batches_of_windows():
    ids, scored = windows()
    model = Counting()
    with pytest.raises(Cancelled):
        evaluate(model, ids, scored, batch_size=4, should_stop=Asked(3))
    assert model.calls == 3  # 3 of 10 batches, then the stop
    base, variant = Counting(), Counting()
    with pytest.raises(Cancelled):
        evaluate_pair(base, variant, ids, scored, batch_size=4, should_stop=Asked(2))
    assert base.calls == variant.calls == 2
    # Never asked to stop: every batch, the same outcomes as without the check.
    whole = evaluate(Counting(), ids, scored, batch_size=4, should_stop=lambda: False)
    assert len(whole.nll) == 40


class Decoder(torch.nn.Module):
    """A model with a key/value cache's interface: the generations it ran are counted."""

    def __init__(self):
        super().__init__()
        self.forwards = 0

    def forward(self, input_ids, past_key_values=None, use_cache=True):
        self.forwards += 1
        out = type("Out", (), {})()
        out.logits = torch.zeros(input_ids.shape[0], input_ids.shape[1], VOCAB)
        out.past_key_values = past_key_values
        return out


def test_timing_stops_between_generations_never_inside_one():
    model = Decoder()
    prompt = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(Cancelled):
        measure_lm_speeds({"a": model}, prompt, torch.device("cpu"), new_tokens=5, rounds=10,
                          warmup=1, memory=False, should_stop=Asked(3))
    # Three whole generations (a prefill and 5 decode steps each), then the stop.
    assert model.forwards == 3 * 6
