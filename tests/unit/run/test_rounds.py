"""The interleaved rounds share each variant's budget and warm a revisit up while it needs it."""
import statistics
import time

import torch
from torch import nn

from benchmarks.report.results import VariantResult
from benchmarks.run.rounds import Built, time_interleaved
from benchmarks.spec.sweep import SweepSpec

CPU = torch.device("cpu")
_last: list = [None]  # the module called last, for one whose first call after another is slow


class Sleeper(nn.Module):
    """A call of ``ms`` milliseconds, ``penalty_ms`` more right after another model ran."""

    def __init__(self, ms: float, penalty_ms: float = 0.0):
        super().__init__()
        self.ms, self.penalty_ms = ms, penalty_ms

    def forward(self, x):
        extra = self.penalty_ms if _last[0] is not self else 0.0
        _last[0] = self
        time.sleep((self.ms + extra) / 1000)
        return x


def _time(models: dict, **spec) -> dict:
    built = [Built(i, VariantResult.of(name, [] if i == 0 else ["prune"]), model, CPU,
                   example=torch.zeros(1))
             for i, (name, model) in enumerate(models.items())]
    time_interleaved(built, SweepSpec(**spec), CPU, torch.zeros(1), lambda *a: None,
                     lambda: False)
    return {b.result.name: b.result for b in built}


def test_a_slow_variant_takes_one_call_a_round_not_two():
    # Rounds of 30 ms against a 45 ms call: each visit stops at its nearest call, and the
    # budget's overshoot is not paid twice per round (20 calls before).
    out = _time({"slow": Sleeper(45)}, min_time_s=0.3, timing_rounds=10, min_runs=1, warmup=1)
    timing = out["slow"].timing
    assert timing.timed_calls == 10 and len(timing.round_p50_ms) == 10


def test_the_rounds_together_spend_about_the_budget():
    out = _time({"fast": Sleeper(4)}, min_time_s=0.4, timing_rounds=5, min_runs=1, warmup=0)
    timing = out["fast"].timing
    assert len(timing.round_p50_ms) == 5
    # What one visit overshoots the next gives back; a loaded machine's sleeps overshoot.
    assert 0.38 <= timing.timed_window_s <= 0.6, timing.timed_window_s


def test_revisits_keep_their_warm_up_only_where_the_first_call_is_slower():
    out = _time({"steady": Sleeper(6), "cold": Sleeper(6, penalty_ms=6)}, min_time_s=0.12,
                timing_rounds=8, min_runs=1, warmup=1)
    assert "within the variant's spread" in out["steady"].timing.how["revisit_warmup"]
    assert "revisit_warmup" not in out["cold"].timing.how
    # The cold one's samples are its warm calls: its first call after the other is never timed.
    assert statistics.median(out["cold"].timing.latency_samples_ms) < 9
