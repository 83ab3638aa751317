"""The certificate's parts on hand-made data (no model runs): the power check, the split, the
fixed-sequence procedure and its stop, the certificate's JSON round trip, the request's and
the space's refusals, successive halving's rungs."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from benchmarks.recommend.certificate import Certificate, certify, judge, order_candidates
from benchmarks.recommend.certificate import Tested as Candidate  # not a test class
from benchmarks.recommend.power import (
    certifiable_pts,
    check_power,
    smallest_margin_pts,
    typical_margin_pts,
)
from benchmarks.recommend.record import Recommended
from benchmarks.recommend.request import Margin, RecommendRequest, parse_budget
from benchmarks.recommend.search import rungs_of
from benchmarks.recommend.space import CHAIN, search_space
from benchmarks.recommend.split import Split, accuracy_at, discordant_at, make_split
from benchmarks.report.results import VariantResult
from benchmarks.report.stats import (EXACT_TEST, SCORE_TEST, noninferiority,
                                     noninferiority_lower, pack_bits)
from benchmarks.spec.variant import VariantSpec
from optimizers.settings import Int8Settings, PruneSettings


def test_power_names_the_smallest_margin_the_certify_split_can_certify():
    # b = c = 0: the certificate's test there is the exact one (no discordant pair), whose
    # one-sided 95% lower limit is below Tango's -z^2 / (n + z^2) (-1.48 points): the
    # guarantee costs 0.19 points on 180 examples.
    z2 = 1.6448536269514722 ** 2
    assert smallest_margin_pts(180, 0.95) == pytest.approx(
        -100 * noninferiority_lower(0, 0, 180, 0.95), abs=1e-9)
    assert smallest_margin_pts(180, 0.95) > 100 * z2 / (180 + z2)
    assert certifiable_pts(180, 0.95) == 1.67
    with pytest.raises(ValueError) as refused:
        check_power(1.0, 180, 0.95)
    line = str(refused.value)
    assert "certify split of 180 test images cannot certify 1 point" in line
    assert "it can certify 1.67 points" in line and "\n" not in line
    assert check_power(1.67, 180, 0.95) == 1.67
    with pytest.raises(ValueError):  # exactly the limit is not above it
        check_power(smallest_margin_pts(180, 0.95), 180, 0.95)
    # More examples certify a smaller margin; more confidence needs a larger one.
    assert smallest_margin_pts(1000, 0.95) < smallest_margin_pts(180, 0.95)
    assert smallest_margin_pts(180, 0.99) > smallest_margin_pts(180, 0.95)


def test_power_advises_the_margin_a_candidate_that_differs_on_some_examples_needs():
    # At the smallest margin one loss and one gain already fail (b = c = 1: -1.95 points);
    # the advice is the margin of a candidate that differs on 1 in 30 examples (3 lost, 3
    # gained of 180), rounded up to a hundredth, and that candidate passes at it.
    assert -100 * noninferiority_lower(1, 1, 180, 0.95) > certifiable_pts(180, 0.95)
    typical = typical_margin_pts(180, 0.95)
    assert -100 * noninferiority_lower(3, 3, 180, 0.95) < typical == 2.68
    # The advice is the certificate's own verdict, not the bisected limit rounded up (2.67,
    # within 0.005 points of the limit, where that candidate's p-value is 0.0506): it passes
    # at 2.68 and fails a hundredth below.
    assert noninferiority(3, 3, 180, typical / 100, 0.95)["rejected"]
    assert not noninferiority(3, 3, 180, (typical - 0.01) / 100, 0.95)["rejected"]
    with pytest.raises(ValueError) as refused:
        check_power(1.0, 180, 0.95)
    assert str(refused.value).endswith("(--within 2.68pt)")
    assert check_power(typical, 180, 0.95) == 1.67  # the advice itself is accepted
    assert typical_margin_pts(1000, 0.95) < typical  # more examples, a smaller margin


def _split(n=400, certify=None):
    certify = tuple(range(0, n, 2)) if certify is None else certify
    return Split(7, n, tuple(i for i in range(n) if i not in set(certify)), certify)


def _result(name, bits, rounds=(), techniques=("int8",)):
    return VariantResult.of(name=name, techniques=list(techniques), correct_bits=pack_bits(bits),
                            n_test=len(bits), accuracy=sum(bits) / len(bits),
                            latency_samples_ms=list(rounds) * 4, round_p50_ms=list(rounds))


def test_an_identical_candidate_is_certified_at_the_margin_the_power_check_names():
    split = _split(360, tuple(range(180)))
    base = _result("baseline", [True] * 300 + [False] * 60, techniques=())
    same = _result("same", [True] * 300 + [False] * 60)
    tested = order_candidates([{"name": "same", "ratio": 2.0}])[0]
    assert judge(tested, same, base, split, certifiable_pts(180, 0.95), 0.95)
    assert (tested.b, tested.c, tested.n) == (0, 0, 180)
    assert "few discordant pairs (0)" in tested.notes[0]
    # Which test and why: the exact one, no pair differing; its p-value below alpha.
    assert tested.test == EXACT_TEST and "few discordant pairs" in tested.test_why
    assert tested.p_value < 0.05 and tested.lower_pts > -certifiable_pts(180, 0.95)
    assert not judge(order_candidates([{"name": "same", "ratio": 2.0}])[0], same, base, split,
                     1.0, 0.95)


def test_the_split_never_overlaps_covers_every_example_and_follows_its_seed():
    for n in (2, 3, 10, 359, 360, 1001):
        for seed in range(12):
            split = make_split(n, seed, 0.5)
            assert not set(split.search) & set(split.certify)
            assert sorted(split.search + split.certify) == list(range(n))
            assert abs(len(split.certify) - n / 2) <= 1
            assert split == make_split(n, seed, 0.5)
            assert Split.from_dict(json.loads(json.dumps(split.to_dict()))) == split
    assert make_split(360, 0, 0.5) != make_split(360, 1, 0.5)
    assert len(make_split(1000, 0, 0.3).certify) == 300
    with pytest.raises(ValueError, match="overlap"):
        Split(0, 4, (0, 1, 2), (2, 3))
    with pytest.raises(ValueError, match="cover"):
        Split(0, 4, (0, 1), (2,))
    with pytest.raises(ValueError, match="more test examples"):
        make_split(1, 0, 0.5)


def test_the_search_reads_only_its_split_and_the_certificate_only_its_own():
    split = _split(10, (0, 1, 2, 3, 4))
    right_on_search = [False] * 5 + [True] * 5
    assert accuracy_at(pack_bits(right_on_search), 10, split.search) == 1.0
    assert accuracy_at(pack_bits(right_on_search), 10, split.certify) == 0.0
    base = [True] * 10
    assert discordant_at(pack_bits(right_on_search), pack_bits(base), 10, split.certify) \
        == (0, 5)


def _sequence_case():
    """A baseline right on 360 of 400 examples; A and D identical to it, B better on two
    certify examples, C wrong on twelve more: timed in five rounds."""
    split = _split()
    base_bits = [True] * 360 + [False] * 40
    better = list(base_bits)
    better[360] = better[362] = True            # certify examples (even)
    worse = list(base_bits)
    for i in range(0, 24, 2):
        worse[i] = False
    base = _result("baseline", base_bits, [10.0, 10.2, 9.9, 10.1, 10.0], techniques=())
    results = {"A": _result("A", base_bits, [8.0, 8.1, 8.2, 7.9, 8.0]),
               "B": _result("B", better, [5.0, 5.1, 4.9, 5.0, 5.2]),
               "C": _result("C", worse, [3.0, 3.1, 2.9, 3.0, 3.0]),
               "D": _result("D", base_bits, [2.0, 2.1, 1.9, 2.0, 2.0])}
    found = [{"name": "D", "ratio": 4.9, "change_pts": 0.0},
             {"name": "A", "ratio": 1.3, "change_pts": 0.0},
             {"name": "C", "ratio": 3.2, "change_pts": -0.5},
             {"name": "B", "ratio": 2.1, "change_pts": 0.5}]
    return split, base, results, found


def test_fixed_sequence_tests_slowest_first_and_stops_at_the_first_failure():
    split, base, results, found = _sequence_case()
    sequence = order_candidates(found)
    assert [t.name for t in sequence] == ["A", "B", "C", "D"]
    assert [t.name for t in order_candidates(list(reversed(found)))] == ["A", "B", "C", "D"]
    cert = certify(sequence, results, base, split, margin_pts=2.0, margin="2pt",
                   confidence=0.95, objective="p50")
    by = {t.name: t for t in cert.candidates}
    assert [t.name for t in cert.certified] == ["A", "B"]
    assert cert.stopped_at == 2 and by["C"].tested and not by["C"].certified
    assert by["C"].lower_pts <= -2.0 and by["C"].c == 12
    # D would pass (identical to the baseline) but comes after the stop: never tested.
    assert not by["D"].tested and by["D"].b is None
    # The winner: the certified one best in the objective, faster beyond its noise.
    assert cert.winner == "B" and cert.speedup["ratio"] == pytest.approx(2.0, rel=0.05)
    assert cert.speedup["ci"][0] > 1 and cert.speedup["faster"]
    assert "B is within 2 points" in cert.reason
    none = certify(order_candidates([{"name": "C", "ratio": 3.0}]), results, base, split,
                   margin_pts=2.0, margin="2pt", confidence=0.95, objective="p50")
    assert none.winner is None and none.stopped_at == 0 and "C, failed" in none.reason


def test_the_winner_is_the_searchs_fastest_unless_the_final_timing_shows_another_faster():
    # Two certified candidates as fast as each other: the one with the better point ratio in
    # this run's final timing is noise. The search's fastest (last in the order) is named,
    # so a rerun that replays the search names the same one.
    split, base, results, _ = _sequence_case()
    bits = [True] * 360 + [False] * 40
    found = [{"name": "P", "ratio": 2.0, "change_pts": 0.0},
             {"name": "Q", "ratio": 2.3, "change_pts": 0.0}]

    def winner(p_rounds):
        results = {"P": _result("P", bits, p_rounds),
                   "Q": _result("Q", bits, [5.1, 5.0, 5.2, 4.9, 5.3])}
        return certify(order_candidates(found), results, base, split, margin_pts=2.0,
                       margin="2pt", confidence=0.95, objective="p50")

    tie = winner([5.0, 5.3, 4.8, 5.2, 4.9])   # P's median a little lower, within noise
    assert [t.name for t in tie.certified] == ["P", "Q"]
    assert tie.candidates[0].ratio > tie.candidates[1].ratio
    assert tie.winner == "Q" and tie.speedup["faster"]
    clear = winner([3.0, 3.1, 2.9, 3.0, 3.1])  # P faster beyond noise in the final timing
    assert clear.winner == "P" and clear.speedup["ratio"] == pytest.approx(10 / 3, rel=0.05)
    # Sizes are counted, not timed: the smaller one is named.
    def sized(r, size):
        return dataclasses.replace(r, cost=dataclasses.replace(r.cost, size_bytes=size))
    small = {"P": sized(_result("P", bits), 100), "Q": sized(_result("Q", bits), 120)}
    base_sized = sized(base, 400)
    by_size = certify(order_candidates(found), small, base_sized, split, margin_pts=2.0,
                      margin="2pt", confidence=0.95, objective="size")
    assert by_size.winner == "P" and by_size.speedup["ratio"] == 4.0


def test_the_certificate_round_trips_through_json():
    split, base, results, found = _sequence_case()
    cert = certify(order_candidates(found), results, base, split, margin_pts=2.0,
                   margin="2pt", confidence=0.95, objective="p50", smallest_margin_pts=1.0)
    data = json.loads(json.dumps(cert.to_dict()))
    assert Certificate.from_dict(data) == cert
    assert data["alpha"] == pytest.approx(0.05) and data["certified"] == ["A", "B"]
    assert data["split"] == split.card()


@pytest.mark.parametrize("within", ["-1pt", "0", "0pt", "50.1pt", "60%", "abc", "1 cm", True])
def test_bad_margins_are_refused_by_name(within):
    with pytest.raises(ValueError, match=r"--within must be a margin in \(0, 50\]"):
        RecommendRequest(within=within)


def test_the_request_parses_margins_and_budgets_and_refuses_the_rest():
    assert Margin.parse("1pt") == Margin(1.0) and Margin.parse("0.5 pts") == Margin(0.5)
    assert Margin.parse("2%") == Margin(2.0, relative=True)
    assert Margin.parse("2%").points(0.9) == pytest.approx(1.8)
    assert (parse_budget("20m"), parse_budget("90s"), parse_budget("1h"),
            parse_budget("2")) == (1200, 90, 3600, 120)
    for bad in ("0", "0m", "-5m", "x", "nan"):
        with pytest.raises(ValueError, match="--budget"):
            parse_budget(bad)
    for kwargs, flag in (({"confidence": 0.5}, "--confidence"), ({"confidence": 1},
                         "--confidence"), ({"confidence": 1.2}, "--confidence"),
                         ({"objective": "speed"}, "--objective"), ({"trials": 0}, "--trials"),
                         ({"budget_s": 0}, "--budget"), ({"certify_fraction": 0.95},
                                                         "--certify-fraction"),
                         ({"sampler": "grid"}, "--sampler")):
        with pytest.raises(ValueError, match=flag):
            RecommendRequest(**kwargs)
    assert RecommendRequest().max_trials == 32 and RecommendRequest(budget_s=60).max_trials is None
    # A budget says how long to search: no early end on a quiet streak unless --patience asks.
    assert RecommendRequest().quiet_limit == 10 and RecommendRequest(trials=5).quiet_limit is None
    assert RecommendRequest(budget_s=60).quiet_limit is None
    assert RecommendRequest(budget_s=60, patience=3).quiet_limit == 3
    assert RecommendRequest.from_dict(RecommendRequest(within="2%").to_dict()).within == "2%"


def test_the_space_comes_from_the_registry_and_the_flags_narrow_it():
    import optuna
    every = search_space({}, set())
    assert every.techniques == ("prune", "distill", "int8", "amp") and len(every.chains) == 15
    ratio = next(k for k in every.knobs if k.name == "prune.ratio")
    assert (ratio.low, ratio.high, ratio.step) == (0.1, 0.9, 0.05)
    narrowed = search_space({("prune", "ratio"): (0.2, 0.4), ("prune", "method"): ("channel",)},
                            {"prune"})
    assert narrowed.chains == ("prune",) and narrowed.fixed == {("prune", "method"): "channel"}
    assert next(k for k in narrowed.knobs if k.name == "prune.ratio").choices == (0.2, 0.4)
    variant = narrowed.suggest(optuna.trial.FixedTrial(
        {"prune.ratio": 0.4, "prune.finetune_epochs": 1}))
    assert variant.name == "prune-channel-0.4-ft1" and variant.prune.method == "channel"
    for point in every.starting_points():  # the registry's defaults, inside the space
        assert every.suggest(optuna.trial.FixedTrial(point)).techniques == (point["chain"],)
    with pytest.raises(ValueError, match="no sweepable knob"):
        search_space({("int8", "mode"): ("static",), ("int8", "calibration_batches"): (8,)},
                     {"int8"})
    with pytest.raises(ValueError, match="which is off"):
        search_space({("prune", "ratio"): (0.2, 0.4)}, {"int8"})
    with pytest.raises(ValueError, match="prune.ratio"):
        search_space({("prune", "ratio"): (0.2, 1.5)}, {"prune"})


def test_chains_that_cannot_apply_to_the_model_leave_the_default_space_said_why():
    import optuna

    from benchmarks.run.checks import technique_preflight
    from benchmarks.spec.sweep import SweepSpec
    # seed_cnn_narrow is seed_cnn's student: nothing smaller to distil it into. Every trial
    # chaining distill without pruning first failed until the space left those chains out;
    # after pruning, the pruned model is the student, and those chains stay.
    narrow = SweepSpec(model="seed_cnn_narrow")

    def fit(space, spec=narrow):
        return space.fitted(lambda n, s, chain: technique_preflight(spec, n, s, chain))
    every = search_space({}, set())
    fitted = fit(every)
    assert set(every.chains) - set(fitted.chains) == {
        "distill", "distill+int8", "distill+amp", "distill+int8+amp"}
    assert len(fitted.chains) == 11 and "prune+distill+int8" in fitted.chains
    assert "left out: distill, distill+int8, distill+amp, distill+int8+amp (model " \
        "seed_cnn_narrow has no obvious smaller sibling" in fitted.describe()
    assert set(fitted.to_dict()["left_out"]) == set(every.chains) - set(fitted.chains)
    assert {CHAIN: "distill"} not in [{CHAIN: p.get(CHAIN)} for p in fitted.starting_points()]
    for point in fitted.starting_points():  # still inside the fitted space
        assert fitted.suggest(optuna.trial.FixedTrial(point)).techniques == (point[CHAIN],)
    # With a student given, or on a model that has one, every chain stays.
    given = search_space({("distill", "student"): "mlp_small"}, set())
    assert fit(given) is given and fit(every, SweepSpec()) is every
    # Asked for by name, distill alone is refused with its reason: one line naming --student.
    with pytest.raises(ValueError, match="give --student"):
        fit(search_space({}, {"distill", "int8"}))
    assert fit(search_space({}, {"prune", "distill"})).chains == ("prune", "prune+distill")


def test_successive_halving_builds_a_trial_at_fewer_epochs_first():
    def prune(epochs):
        return VariantSpec("p", ("prune",), {"prune": PruneSettings(0.5, "l1", epochs)})
    assert [(e, v.prune.finetune_epochs) for e, v in rungs_of(prune(3))] == [(1, 1), (2, 2)]
    assert [e for e, _ in rungs_of(prune(2))] == [1]
    assert rungs_of(prune(1)) == [] and rungs_of(prune(0)) == []
    assert rungs_of(VariantSpec("q", ("int8",), {"int8": Int8Settings("static")})) == []
    assert math.isclose(rungs_of(prune(3))[0][1].prune.ratio, 0.5)


def _record(winner=None, candidates=(), trials=()) -> Recommended:
    """A stored recommendation as its views read it, from a block holding what they need."""
    return Recommended.from_dict({
        "certificate": Certificate(1.0, "1pt", 0.95, "p50", {}, winner=winner,
                                   candidates=list(candidates)).to_dict(),
        "split": {"seed": 0, "search_size": 1, "certify_size": 1, "test_examples": 2},
        "search": {"trials": list(trials)}})


def test_a_stored_block_reads_as_its_typed_record_whatever_it_lacks_or_adds():
    """The views read a Recommended, never the block: an older block (no runtimes, no
    final timing, no recipe) reads with their defaults, a newer writer's keys are left in
    the JSON, and the certificate round-trips."""
    cert = Certificate(1.0, "1pt", 0.95, "p50", {"seed": 3}, winner="int8",
                       candidates=[Candidate(0, "int8", 1.4, -0.1, tested=True,
                                             certified=True)])
    block = {"certificate": {**cert.to_dict(), "added_later": 1},
             "split": {"seed": 3, "search_size": 5, "certify_size": 6, "test_examples": 11,
                       "search": [0, 1], "certify": [2]},
             "search": {"trials": [{"name": "int8", "state": "complete", "ratio": 1.4,
                                    "search_change_pts": -0.1, "number": 0, "params": {}},
                                   {"name": "amp", "state": "pruned"}]}}
    rec = Recommended.from_dict(block)
    assert rec.certificate.to_dict() == cert.to_dict()
    assert rec.runtimes == ("eager",) and not rec.final_timing and rec.recipe is None
    assert [t.name for t in rec.measured] == ["int8"] and [t.name for t in rec.pruned] == ["amp"]
    assert (rec.split.search_size, rec.split.certify_size) == (5, 6)
    with pytest.raises(KeyError):  # a block without its certificate is not a recommendation
        Recommended.from_dict({"split": block["split"]})


def test_the_summary_says_what_faster_the_search_found_outside_the_margin():
    from benchmarks.views.recommendation import faster_outside

    def block(winner, *trials):
        return _record(winner, trials=[{"name": n, "state": "complete", "ratio": r,
                                        "search_change_pts": d} for n, r, d in trials])
    found = [("int8", 1.3, -0.2), ("prune-0.5", 2.6, -26.3), ("prune-0.3", 1.9, -4.0),
             ("amp", 0.1, 0.0)]
    assert faster_outside(block("int8", *found)) == (
        "faster, outside the margin: prune-0.5 at 2.60x in the search lost 26.30 points on "
        "the search split (the margin: 1)")
    # Nothing faster than the winner lost accuracy: nothing to say.
    assert faster_outside(block("prune-0.5", *found)) is None
    # No winner: against the baseline's 1x.
    assert faster_outside(block(None, ("prune-0.3", 1.9, -4.0), ("amp", 0.5, -3.0))) \
        .startswith("faster, outside the margin: prune-0.3 at 1.90x")


def test_the_summary_says_which_faster_candidate_failed_and_the_cpus_int8_roof():
    """Issue 30: where the answer is slower than hoped, the one line why: the faster
    candidate that failed on the certify split (and those never tested after it), and, where
    INT8 was a candidate, its roof on this instruction set against fp32's."""
    from benchmarks.views.recommendation import int8_roof, not_certified
    candidates = [
        Candidate(0, "int8-static", 1.51, None, tested=True, certified=True, theta_pts=0.0,
               lower_pts=-0.39),
        Candidate(1, "distill-T1", 10.94, None, tested=True, certified=False, theta_pts=-0.48,
               lower_pts=-1.16),
        Candidate(2, "distill-T4", None, None)]
    block = _record("int8-static", candidates)
    assert not_certified(block) == [
        "faster, not certified: distill-T1 (10.94x in the search) changed accuracy by -0.48 "
        "points on the certify split, worst case -1.16: beyond the 1-point margin; 1 "
        "candidate after it was not tested (the sequence ends at its first failure, which is "
        "what keeps one error rate for all)"]
    passed = _record("int8-static", candidates[:1])
    assert not_certified(passed) == []
    avx2 = {"peaks": {"cpu": {"theoretical": {
        "isa": "avx2 fma avx", "gemm_flops_per_s": {"fp32": 1e11, "int8": 2e11},
        "derivation": {"int8": "1 core(s) x 3.2 GHz x 64 FLOP/cycle: AVX2 vpmaddubsw, no "
                               "VNNI"}}}}}
    assert int8_roof(block, avx2) == (
        "INT8's roof on this CPU (avx2 fma avx): 2.0x fp32's, AVX2 vpmaddubsw, no VNNI; no "
        "INT8 variant gains more than that from its arithmetic here")
    assert int8_roof(block, None) is None  # a run stored without its peaks: nothing said
    no_int8 = _record(None, candidates[1:])
    assert int8_roof(no_int8, avx2) is None


def test_a_replay_certifies_as_the_earlier_run_did_with_or_without_its_final_timing(tmp_path):
    # A budget that ended before the final timing left the cold run's certificate on the
    # search's rounds; its warm replay timed the candidates again and named another winner.
    from benchmarks.recommend.memo import Memo
    from benchmarks.store.database import ResultsStore
    store = ResultsStore(tmp_path / "s.db")
    asked = RecommendRequest(within="1pt", budget_s=60).to_dict()

    def earlier(final: bool) -> None:
        run_id = store.start_run(model="m", dataset="d", device="cpu", spec={},
                                 environment={})
        store.set_recommendation(run_id, {
            "context": "ctx", "request": asked, "final_timing": final,
            "search": {"ended": "the wall-time budget ran out", "trials": [
                {"name": "a", "state": "complete"}, {"name": "b", "state": "failed",
                                                     "error": "stopped before it was measured"}]}})
        store.finish_run(run_id, "complete")
    earlier(final=False)
    memo = Memo(store, "ctx", "m", "d", asked)
    assert memo.replay == 1 and memo.replay_final is False
    earlier(final=True)  # the newest run is the one replayed
    assert Memo(store, "ctx", "m", "d", asked).replay_final is True
    other = RecommendRequest(within="2pt", budget_s=60).to_dict()
    assert Memo(store, "ctx", "m", "d", other).replay is None


@pytest.mark.parametrize("rounds, coverage, label", [
    (3, 0.75, "75% interval, 3 paired rounds"),      # the budget cut the final timing
    (5, 0.9375, "93.8% interval, 5 paired rounds"),
    (6, 0.95, "95% interval, 6 paired rounds"),      # the final timing's least (pipeline)
])
def test_the_speedup_interval_states_its_rounds_and_the_coverage_they_can_give(
        rounds, coverage, label):
    # Before, three search rounds' interval (their range: it covers the median ratio with
    # probability 1 - 2 * 0.5^3 = 75%) stood beside the speed-up as if it were 95%.
    from benchmarks.recommend.pipeline import FINAL_ROUNDS_MIN
    assert FINAL_ROUNDS_MIN >= 6
    split = _split()
    bits = [True] * 360 + [False] * 40
    base = _result("baseline", bits, [10.0, 10.3, 9.8, 10.1, 9.9, 10.2][:rounds], ())
    fast = _result("F", bits, [5.0, 5.2, 4.9, 5.1, 5.0, 4.8][:rounds])
    cert = certify(order_candidates([{"name": "F", "ratio": 2.0, "change_pts": 0.0}]),
                   {"F": fast}, base, split, margin_pts=2.0, margin="2pt", confidence=0.95,
                   objective="p50")
    assert cert.winner == "F"
    assert cert.speedup["rounds"] == rounds and cert.speedup["coverage"] == coverage
    assert f"({label})" in cert.reason
    assert ("95%" in cert.reason.split(" and ")[-1]) == (rounds >= 6)
    assert Certificate.from_dict(json.loads(json.dumps(cert.to_dict()))) == cert


def test_a_certificate_stored_before_the_exact_test_recomputes_with_tangos():
    """At 1.4 points on 200 certify examples an identical candidate passes Tango's score test
    (-1.34) but not the exact one (-1.50): a certificate made today says exact and fails, one
    stored before (no test named in its rows) is redone with Tango's and certifies again."""
    from benchmarks.recommend.certificate import recompute
    from benchmarks.report.stats import SCORE_TEST
    split, base, results, found = _sequence_case()

    def document(cert_dict):
        return {"recommendation": {"certificate": cert_dict, "split": split.to_dict()},
                "variants": [base.to_dict(), *(r.to_dict() for r in results.values())],
                "baseline": "baseline"}
    kwargs = dict(margin_pts=1.4, margin="1.4pt", confidence=0.95, objective="p50")
    now = certify(order_candidates(found), results, base, split, **kwargs)
    assert not now.certified and now.candidates[0].test == EXACT_TEST
    assert recompute(document(now.to_dict())).to_dict() == now.to_dict()
    before = certify(order_candidates(found), results, base, split, test=SCORE_TEST, **kwargs)
    stored = json.loads(json.dumps(before.to_dict()))
    for t in stored["candidates"]:
        t.pop("test"), t.pop("test_why"), t.pop("p_value")
    again = recompute(document(stored))
    assert [t.name for t in again.certified] == stored["certified"] == ["A", "B"]
    assert [t.lower_pts for t in again.candidates] == [t["lower_pts"] for t in
                                                       stored["candidates"]]
    assert again.winner == stored["winner"] and again.stopped_at == stored["stopped_at"]
    assert all(t.test is None for t in again.candidates)


def test_the_summary_names_each_test_once_with_how_many_candidates_it_judged():
    """Five candidates judged by the exact test read as one clause, not five near-copies
    differing only in their counts of discordant pairs."""
    from benchmarks.views.recommendation import TEST_WORDS, which_tests
    from benchmarks.report.stats import exact_rule
    candidates = [Candidate(i, f"c{i}", None, None, tested=True,
                         test=EXACT_TEST if exact_rule(b, 0)[0] else SCORE_TEST,
                         test_why=exact_rule(b, 0)[1])
                  for i, b in enumerate((12, 16, 18, 6, 80))]
    lines = which_tests(candidates + [Candidate(5, "untested", None, None)])
    # In a reader's words (the references on hover, TEST_REFERENCES), not "Sidik 2003".
    assert lines == [f"{TEST_WORDS[EXACT_TEST]} for 4 of 5 (fewer than 50 images where it and "
                     f"the baseline differ: the score interval's size is not guaranteed there)",
                     f"{TEST_WORDS[SCORE_TEST]} for 1 of 5 (50 or more images where it and the "
                     f"baseline differ: its normal approximation holds)"]
    assert "an exact test (few differing images)" in lines[0] and "Sidik" not in lines[0]
