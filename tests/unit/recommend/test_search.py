"""The search's stopping rule and its front, on scripted trials: the real Optuna study and
search space propose the trials, and each new trial's objective values (its search-split
accuracy and its speed-up) are fed in directly through the memo's interface, as a stored
earlier measurement would be; no model is trained or timed. Also the budget's reserve and
the final timing's stop, on the ``Stop`` itself."""

from __future__ import annotations

import random

import pytest

from benchmarks.recommend.memo import Hit, Memo
from benchmarks.recommend.request import STARTUP_TRIALS, RecommendRequest
from benchmarks.recommend.search import NOTHING_SEARCHED, Search, TrialRecord, pareto_front
from benchmarks.recommend.space import search_space
from benchmarks.recommend.split import make_split
from benchmarks.recommend.stopping import Stop
from benchmarks.report.results import VariantResult
from benchmarks.report.stats import pack_bits

N_TEST = 200           # a 100-example search split: one example is one point
MARGIN_PTS = 3.0
BASE_RIGHT = 95        # the baseline's search-split examples right: 95%


class Scripted:
    """A memo whose every lookup is the next scripted (search examples right, ratio): the
    search's loop, sampler and bookkeeping run as they do on real measurements."""
    replay = None

    def __init__(self, split, values):
        self.split, self.values, self.calls = split, list(values), 0

    def get(self, digest):
        if self.calls >= len(self.values):
            raise AssertionError("the search asked for more trials than were scripted")
        right, ratio = self.values[self.calls]
        self.calls += 1
        return Hit(_result(self.split, f"scripted-{self.calls}", right), {"ratio": ratio},
                   None, "scripted")


def _result(split, name, right):
    bits = [False] * N_TEST
    for i in split.search[:right]:
        bits[i] = True
    return VariantResult.of(name=name, correct_bits=pack_bits(bits), n_test=N_TEST)


def _search(values, stop=None, **request):
    split = make_split(N_TEST, 0, 0.5)
    base = _result(split, "baseline", BASE_RIGHT)
    space = search_space({}, {"prune"})  # 204 points: more than any script here
    memo = Scripted(split, values)
    search = Search(space, RecommendRequest(**request), split, base, MARGIN_PTS, waves=None,
                    stop=stop or Stop(), seed=0, memo=memo)
    return search.run(), memo


# Eight random-start trials: the first two faster and within the margin (the front), the rest
# infeasible (92 right: -3 points) or slower. Then the sampler's own proposals.
START = [(95, 1.5), (94, 2.0), (92, 3.0), (95, 0.8), (92, 4.0), (93, 1.2), (90, 5.0),
         (95, 0.9)]


def test_the_search_stops_after_exactly_patience_trials_that_add_nothing_and_not_before():
    # Trials 9 and 10 enter the front (a faster point; a more accurate one); 11-13 add
    # nothing (dominated; equal to a front point; infeasible). Before, a trial was compared
    # with the front it was already on, so 9 and 10 counted as quiet and it ended after 11.
    values = START + [(94, 2.5), (96, 1.4), (93, 1.1), (94, 2.5), (91, 9.0), (99, 9.0)]
    log, memo = _search(values, patience=3)
    assert log.ended == "converged: 3 trials in a row found nothing better"
    assert memo.calls == len(log.trials) == STARTUP_TRIALS + 5
    assert [t.improved for t in log.trials[STARTUP_TRIALS:]] == [True, True, False, False,
                                                                  False]
    # One more improvement among the quiet ones starts the count again: 3 more after it.
    values = START + [(94, 2.5), (93, 1.1), (93, 1.0), (95, 3.0), (93, 1.1), (93, 1.1),
                      (93, 1.1), (99, 9.0)]
    log, memo = _search(values, patience=3)
    assert log.ended.startswith("converged") and len(log.trials) == STARTUP_TRIALS + 7


def test_a_search_that_keeps_improving_runs_to_its_trials_not_to_startup_plus_patience():
    # Without --budget or --patience: patience 10, 32 trials. Each trial faster than the
    # last: every one enters the front, so it never converges (before, it stopped at 18).
    values = [(95, 1.1 + 0.1 * i) for i in range(32)]
    log, _ = _search(values)
    assert log.ended == "32 trials (the default)" and len(log.trials) == 32
    assert all(t.improved for t in log.trials)
    assert [t.front for t in log.trials] == [False] * 31 + [True]


def _brute_front(trials):
    good = [t for t in trials if t.state == "complete" and t.feasible and t.ratio > 1]
    return {t.name for t in good
            if not any(o.search_accuracy >= t.search_accuracy and o.ratio >= t.ratio
                       and (o.search_accuracy, o.ratio) != (t.search_accuracy, t.ratio)
                       for o in good)}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_stored_front_flags_are_the_brute_force_front_of_every_trial(seed):
    rng = random.Random(seed)
    values = [(rng.randint(88, 99), round(rng.uniform(0.5, 4.0), 2)) for _ in range(24)]
    log, _ = _search(values, trials=24)
    assert len(log.trials) == 24
    front = _brute_front(log.trials)
    assert front and {t.name for t in log.trials if t.front} == front
    assert {t.name for t in log.front()} == front
    # And each trial's ``improved``: nothing measured before it at least as good in both.
    for i, t in enumerate(log.trials):
        eligible = t.state == "complete" and t.feasible and t.ratio > 1
        before = [o for o in log.trials[:i] if o.name in _brute_front(log.trials[:i])]
        assert t.improved == (eligible and not any(
            o.search_accuracy >= t.search_accuracy and o.ratio >= t.ratio for o in before))
    # The stored dicts carry the same flags (what the chart and a reader see).
    stored = {t["name"]: t["front"] for t in log.to_dict()["trials"]}
    assert {n for n, on in stored.items() if on} == front


def test_pareto_front_keeps_ties_and_drops_the_dominated_and_the_ineligible():
    def rec(name, acc, ratio, feasible=True):
        return TrialRecord(0, name, name, {}, {}, state="complete", search_accuracy=acc,
                           ratio=ratio, feasible=feasible)
    trials = [rec("a", 0.95, 2.0), rec("b", 0.95, 2.0), rec("c", 0.94, 1.9),
              rec("d", 0.90, 5.0, feasible=False), rec("e", 0.96, 0.9), rec("f", 0.93, 3.0)]
    assert {t.name for t in pareto_front(trials)} == {"a", "b", "f"}


def test_a_budget_spent_before_any_trial_says_so_in_one_line():
    stop = Stop(budget_s=1e-9)  # spent at once
    log, memo = _search(START, stop=stop, budget_s=1e-9)
    assert memo.calls == 0 and log.ended == NOTHING_SEARCHED
    assert len(NOTHING_SEARCHED.splitlines()) == 1 and "budget" in NOTHING_SEARCHED


def test_the_search_leaves_the_final_timing_and_its_next_wave_their_time():
    # 100 s left: a reserve of 60 s and waves of 50 s leave no room for another wave.
    stop = Stop(budget_s=100.0)
    split = make_split(N_TEST, 0, 0.5)
    search = Search(search_space({}, {"prune"}), RecommendRequest(budget_s=100.0), split,
                    _result(split, "baseline", BASE_RIGHT), MARGIN_PTS, waves=None, stop=stop,
                    seed=0, memo=Scripted(split, START), reserve_s=lambda candidates: 60.0)
    assert search._should_end(0, 0, 0) is None
    search.wave_s = [50.0]
    assert "budget" in search._should_end(1, 0, 0)


def test_the_final_timings_stop_ignores_the_budget_but_not_a_cancel():
    cancel = []
    stop = Stop(lambda: bool(cancel), budget_s=1e-9)
    assert stop() and stop.reason == "budget"
    final = stop.unless_budget()
    assert not final()
    cancel.append(True)
    assert final() and stop.reason == "cancelled"


def test_memo_does_not_replay_a_search_that_measured_no_trial():
    class Store:
        def runs(self, **_):
            return [{"run_id": "r1", "recommendation": {
                "context": "k", "request": {"a": 1}, "final_timing": False,
                "search": {"ended": NOTHING_SEARCHED, "trials": []}}}]

        def run(self, run_id):
            return {"variants": []}
    assert Memo(Store(), "k", "m", "d", {"a": 1}).replay is None


def test_a_budget_that_runs_out_while_the_data_load_is_one_line_not_a_traceback(tmp_path):
    # The budget's stop reaches the data load (an image folder checks it between files): its
    # Cancelled (a BaseException) escaped the CLI's error boundary as a traceback.
    from PIL import Image

    from benchmarks.recommend.pipeline import Recommender
    from benchmarks.spec.sweep import SweepSpec
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for i in range(4):
            Image.new("L", (8, 8), 30 * i).save(tmp_path / cls / f"{i}.png")
    spec = SweepSpec(model="seed_cnn", dataset=f"imagefolder:{tmp_path}",
                     input_shape=(1, 8, 8), epochs=1)
    with pytest.raises(ValueError) as refused:
        Recommender(RecommendRequest(within="20pt", budget_s=1e-6), spec,
                    search_space({}, {"prune"}))
    line = str(refused.value)
    assert "\n" not in line and "while the data loaded" in line
    assert "the shortest useful budget here is more than" in line


def _digest_int(text: str) -> int:
    import hashlib
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def _by_name(split, name: str, right: int, p50_ms: float) -> VariantResult:
    result = _result(split, name, right)
    result.timing.latency_samples_ms = [p50_ms * (1 + 0.001 * i) for i in range(5)]
    return result


class NamedWaves:
    """Waves whose every measurement is a function of the variant's name: what a cold search
    measures, without training or timing (its baseline at 10 ms)."""

    def __init__(self, split):
        self.split = split

    def measure(self, variants, rounds, runtimes=None):
        base = _by_name(self.split, "baseline", BASE_RIGHT, 10.0)
        return base, [_by_name(self.split, v.name, 84 + _digest_int(v.name) % 14,
                               2.0 + _digest_int(v.name[::-1]) % 9) for v in variants], False


class Earlier:
    """The memo a warm rerun builds from the cold search's log: complete trials are hits with
    their records, pruned ones their rungs, and the replay is the cold search's length."""

    def __init__(self, log):
        self.replay = len(log.trials)
        self.hits = {t.hash: Hit(log.results[t.name], {"ratio": t.ratio, "ratio_ci": t.ratio_ci,
                                                       "rungs": t.rungs}, None, "cold")
                     for t in log.trials if t.state == "complete"}
        self.pruned = {t.hash: t.rungs for t in log.trials if t.state == "pruned"}

    def get(self, digest):
        return self.hits.get(digest)

    def pruned_rungs(self, digest):
        return self.pruned.get(digest)


def test_a_warm_replay_prunes_and_proposes_as_the_cold_search_did():
    """Successive halving's pruner compares a trial with every earlier one at the same rung:
    a replay that reuses the measured trials without telling the companion study their
    rungs pruned differently, and from there the sampler proposed other trials (CI: the
    warm rerun parted from the cold one at trial 25)."""
    split = make_split(N_TEST, 0, 0.5)
    base = _result(split, "baseline", BASE_RIGHT)
    space = search_space({}, {"prune", "distill"})

    def rung_bits(cheaper):
        right = 80 + _digest_int(cheaper.name) % 18
        return _result(split, cheaper.name, right).scores.correct_bits, N_TEST

    def search(memo):
        return Search(space, RecommendRequest(trials=40), split, base, MARGIN_PTS,
                      waves=NamedWaves(split), stop=Stop(), seed=0, memo=memo,
                      rung_bits=rung_bits).run()

    cold = search(None)
    states = [t.state for t in cold.trials]
    assert states.count("pruned") >= 2 and states.count("complete") >= 10, states
    warm = search(Earlier(cold))
    assert [(t.name, t.state) for t in warm.trials] == [(t.name, t.state) for t in cold.trials]
    assert all(t.reused == "cold" for t in warm.trials if t.state == "complete")


def _trial(name, acc, ratio, feasible=True):
    return TrialRecord(0, name, name, {}, {}, state="complete", search_accuracy=acc,
                       search_change_pts=0.0, ratio=ratio, feasible=feasible)


def test_a_thin_front_is_followed_by_the_next_layers_that_fit_whole():
    from benchmarks.recommend.search import candidate_trials, pareto_layers
    # mnist5k on an AVX2 Zen 3: a front of two; a student 0.08 points behind the faster one
    # at half its speed; then two points neither of which dominates the other.
    trials = [_trial("prune", 0.9056, 1.93), _trial("student-fast", 0.9008, 22.5),
              _trial("student-near", 0.9000, 11.2), _trial("student-int8", 0.8992, 10.9),
              _trial("int8-a", 0.9000, 1.43), _trial("int8-b", 0.8992, 1.45),
              _trial("slower", 0.95, 0.9), _trial("outside", 0.5, 30.0, feasible=False)]
    layers = [sorted(t.name for t in layer) for layer in pareto_layers(trials)]
    assert layers == [["prune", "student-fast"], ["student-near"],
                      ["int8-a", "student-int8"], ["int8-b"]]
    names = lambda k: sorted(t.name for t in candidate_trials(trials, k))  # noqa: E731
    assert names(6) == ["int8-a", "int8-b", "prune", "student-fast", "student-int8",
                        "student-near"]
    # A layer that does not fit whole is left out (no tie broken by a coin).
    assert names(4) == ["prune", "student-fast", "student-near"]
    # A front larger than k: k of it, spread over its speeds, nothing behind it.
    front = [_trial(f"f{i}", 0.9 - i / 100, 1.5 + i) for i in range(8)]
    assert [t.name for t in candidate_trials(front + [_trial("behind", 0.8, 1.2)], 3)] == ["f0", "f4", "f7"]
