"""``recommend`` on the embedded digits, through the CLI: the power check's refusal, bad input
refused before anything runs, a certified winner whose certificate a reader recomputes from
the stored per-example bits, the search reading only its split, the same answer again from a
warm cache in less time, and Ctrl-C certifying what was found.

The search space is INT8's two modes (calibration fixed): two trials, no training beyond the
baseline's two epochs, so the module takes well under a minute."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from benchmarks.cli.main import main
from benchmarks.recommend.certificate import recompute
from benchmarks.recommend.request import STARTUP_TRIALS
from benchmarks.recommend.split import accuracy_at
from benchmarks.report.stats import noninferiority, pack_bits, paired_difference, unpack_bits
from helpers import ROOT, run_cli, scaled

SPACE = ["--int8", "dynamic,static", "--calibration-batches", "8"]
BUDGET = ["--epochs", "2", "--min-time", "0.05", "--timing-rounds", "5"]
MARGIN = "3pt"  # above digits' 1.67: a candidate with a couple of discordant pairs passes


def _recommend(store, json_file, cache, *extra):
    t0 = time.perf_counter()
    p = run_cli("recommend", *SPACE, *BUDGET, "--within", MARGIN, "--store", str(store),
                "--json", str(json_file), *extra, env={"COMPRESSION_BENCH_CACHE": str(cache)})
    return time.perf_counter() - t0, p


@pytest.fixture(scope="module")
def recommended(tmp_path_factory):
    """Two runs of the same command, a cold cache then warm: (cold, warm) each as
    (seconds, process, document), and the cache."""
    tmp = tmp_path_factory.mktemp("recommend")
    out = []
    for name in ("cold", "warm"):
        seconds, p = _recommend(tmp / "s.db", tmp / f"{name}.json", tmp / "cache", "--quiet")
        assert p.returncode == 0, p.stderr
        out.append((seconds, p, json.loads((tmp / f"{name}.json").read_text())))
    return (*out, tmp / "cache")


def test_a_reader_recomputes_the_certificate_from_the_stored_bits(recommended):
    _, p, doc = recommended[0]
    rec = doc["recommendation"]
    cert = rec["certificate"]
    assert cert["winner"] == "int8-static" and cert["margin_pts"] == 3.0
    assert f"certified: {cert['winner']} is within 3 points" in p.stdout
    # The reader's arithmetic, from the JSON alone: the certify indices, each candidate's
    # bits against the baseline's, Tango's lower limit against -delta, in the stated order.
    certify = rec["split"]["certify"]
    n_test = rec["split"]["test_examples"]
    variants = {v["name"]: v for v in doc["variants"]}

    def bits(name):
        raw = variants[name]["raw"]
        assert raw["n_test"] == n_test
        every = unpack_bits(raw["correct_bits"], n_test)
        return [every[i] for i in certify]
    base = bits(doc["baseline"])
    stopped = None
    for tested in cert["candidates"]:
        mine = bits(tested["name"])
        b = sum(1 for x, y in zip(mine, base) if x and not y)
        c = sum(1 for x, y in zip(mine, base) if y and not x)
        assert (b, c, len(certify)) == (tested["b"], tested["c"], tested["n"])
        # The certificate's test (exact where discordant pairs are few), named in its row.
        test = noninferiority(b, c, len(certify), cert["margin_pts"] / 100, cert["confidence"])
        lower = 100 * test["lower"]
        assert lower == pytest.approx(tested["lower_pts"])
        assert tested["test"] == test["test"] and tested["p_value"] == test["p_value"]
        assert paired_difference(b, c, len(certify), cert["confidence"])["ci_pts"] == \
            pytest.approx(tested["interval_pts"])
        if lower <= -cert["margin_pts"]:
            stopped = tested["order"]
            break
        assert tested["certified"]
    assert stopped == cert["stopped_at"]
    # And the library's own recomputation agrees, the speed-up's bootstrap included.
    again = recompute(doc)
    assert again.to_dict() == cert
    assert cert["speedup"]["timed"] == "final" and len(cert["speedup"]["ci"]) == 2
    # It names the device its speed was measured on (issue 48.5), in the CLI's lines too.
    from benchmarks.measure.environment import cpu_name
    from benchmarks.recommend.record import Recommended
    from benchmarks.views.recommendation import summary_lines
    assert cert["device"] == f"cpu ({cpu_name()})"
    assert f"measured on cpu ({cpu_name()})" in summary_lines(
        Recommended.from_dict(doc["recommendation"]))[1]


def test_the_split_is_in_the_environment_card_and_the_search_reads_only_its_half(recommended):
    _, _, doc = recommended[0]
    card, split = doc["environment"]["split"], doc["recommendation"]["split"]
    assert card == {k: split[k] for k in card}
    assert (card["seed"], card["search_size"], card["certify_size"]) == (0, 180, 180)
    assert not set(split["search"]) & set(split["certify"])
    variants = {v["name"]: v["raw"] for v in doc["variants"]}
    base = variants[doc["baseline"]]
    base_search = accuracy_at(base["correct_bits"], base["n_test"], split["search"])
    for trial in doc["recommendation"]["search"]["trials"]:
        if trial["state"] != "complete":
            continue
        raw = variants[trial["name"]]
        assert trial["search_accuracy"] == accuracy_at(raw["correct_bits"], raw["n_test"],
                                                       split["search"])
        # Every certify bit flipped: what the search saw (and so the order) is unchanged.
        every = unpack_bits(raw["correct_bits"], raw["n_test"])
        flipped = [not x if i in set(split["certify"]) else x for i, x in enumerate(every)]
        assert accuracy_at(pack_bits(flipped), raw["n_test"], split["search"]) == \
            trial["search_accuracy"]
        assert trial["search_change_pts"] == pytest.approx(
            100 * (trial["search_accuracy"] - base_search))


def test_a_warm_rerun_gives_the_same_winner_and_certificate_in_less_time(recommended):
    (cold_s, _, cold), (warm_s, _, warm), _ = recommended
    a, b = cold["recommendation"], warm["recommendation"]
    assert all(t["reused"] for t in b["search"]["trials"] if t["state"] == "complete")
    assert [t["name"] for t in a["search"]["trials"]] == [t["name"] for t in b["search"]["trials"]]
    keep = ("order", "name", "b", "c", "n", "lower_pts", "interval_pts", "certified")
    assert [{k: t[k] for k in keep} for t in a["certificate"]["candidates"]] == \
        [{k: t[k] for k in keep} for t in b["certificate"]["candidates"]]
    assert a["certificate"]["winner"] == b["certificate"]["winner"]
    assert warm_s < cold_s, (cold_s, warm_s)


def test_a_margin_the_certify_split_cannot_certify_is_refused_with_the_one_it_can(
        capsys, tmp_path):
    store = tmp_path / "s.db"
    assert main(["recommend", *SPACE, "--within", "1pt", "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: the certify split of 180 test images cannot certify 1 point at "
                   "95% confidence; it can certify 1.67 points only for a candidate that "
                   "agrees with the baseline on every example, and 2.68 points for one that "
                   "differs on 1 in 30 of them, as often right as wrong; use a larger data set "
                   "or a wider margin (--within 2.68pt)")
    assert not store.exists()  # refused before a run was recorded


@pytest.mark.parametrize("args, words", [
    (["--within", "-1pt"], "--within must be a margin"),
    (["--within", "0"], "--within must be a margin"),
    (["--within", "51pt"], "--within must be a margin"),
    (["--confidence", "1"], "--confidence must be in (0.5, 1)"),
    (["--confidence", "0.5"], "--confidence must be in (0.5, 1)"),
    (["--budget", "0"], "--budget must be"),
    (["--trials", "0"], "--trials must be a positive integer"),
    (["--int8", "static", "--calibration-batches", "8"], "no sweepable knob"),
    (["--dataset", "synthetic", "--input-shape", "1,8,8"], "has no labels"),
])
def test_bad_input_is_one_line_and_exit_2_before_anything_runs(capsys, tmp_path, args, words):
    store = tmp_path / "s.db"
    argv = ["recommend", *(SPACE if "--int8" not in args else []), *args, "--store",
            str(store)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not store.exists()


def test_a_budget_too_short_for_one_trial_is_refused_at_once_with_the_shortest_useful_one(
        tmp_path):
    # Before, --budget 1s took 12 s (the data load and the baseline ran past it) and ended
    # in "the budget ran out before the baseline was trained", naming no budget that works.
    store = tmp_path / "s.db"
    p = run_cli("recommend", *SPACE, *BUDGET, "--within", MARGIN, "--budget", "1s",
                "--store", str(store), env={"COMPRESSION_BENCH_CACHE": str(tmp_path / "c")})
    assert p.returncode == 2, p.stderr
    err = p.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err  # no "split:" line:
    assert err.startswith("error: --budget 1s is too short for one trial")  # no data loaded
    assert "the shortest useful budget here is more than" in err and "(--budget " in err
    assert not store.exists()


def test_a_budget_the_set_up_leaves_too_little_of_is_refused_before_any_trial(
        recommended, capsys, tmp_path, monkeypatch):
    # In-process, so the budget starts at the call; the baseline is cached. 3 s pass the
    # check before the data load and cannot hold the set-up, one trial and its final timing
    # (its overhead alone is more): refused, measured, naming the shortest useful budget.
    store = tmp_path / "s.db"
    monkeypatch.setenv("COMPRESSION_BENCH_CACHE", str(recommended[2]))
    code = main(["recommend", *SPACE, *BUDGET, "--within", MARGIN, "--budget", "3s",
                 "--store", str(store), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("error: --budget 3s is too short for one trial: ")
    assert "the shortest useful budget here is" in err
    from benchmarks.store.database import ResultsStore
    assert ResultsStore(store).runs() == []  # nothing searched, no run stored


def test_the_search_does_not_converge_inside_the_samplers_random_start(recommended, tmp_path):
    # Patience 1: before, the second quiet trial after the first on the front ended it, while
    # the sampler was still drawing at random (2 trials here). Calibration 1..16: 16 points.
    p = run_cli("recommend", "--int8", "static", "--calibration-batches", "1:16:16", *BUDGET,
                "--within", MARGIN, "--patience", "1", "--store", str(tmp_path / "s.db"),
                "--json", str(tmp_path / "r.json"), "--quiet",
                env={"COMPRESSION_BENCH_CACHE": str(recommended[2])})
    assert p.returncode == 0, p.stderr
    search = json.loads((tmp_path / "r.json").read_text())["recommendation"]["search"]
    assert search["ended"].startswith("converged"), search["ended"]
    assert len(search["trials"]) >= STARTUP_TRIALS + 1


def test_ctrl_c_stops_the_search_and_certifies_what_it_found(recommended, tmp_path):
    store = tmp_path / "s.db"
    args = [sys.executable, "-m", "benchmarks", "recommend", "--prune", "0.1:0.9:17",
            "--prune-method", "l1,channel", "--finetune-epochs", "0", *BUDGET,
            "--within", MARGIN, "--trials", "40", "--store", str(store)]
    # Ctrl-C as a terminal sends it: a suite started in the background (a non-interactive
    # shell's `make test &`) hands its children SIGINT ignored, and Python then keeps ignoring it.
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ,  # the baseline trained already
                                            "COMPRESSION_BENCH_CACHE": str(recommended[2])},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    for line in proc.stderr:  # one line per trial: interrupt after the second
        seen.append(line)
        if line.startswith("trial 2 "):
            proc.send_signal(signal.SIGINT)
            break
    out, rest = proc.communicate(timeout=scaled(120))
    assert proc.returncode == 130, "".join(seen) + rest
    from benchmarks.store.database import ResultsStore
    run = ResultsStore(store).runs()[0]
    rec = run["recommendation"]
    assert run["status"] == "interrupted" and rec["stopped"] == "interrupted (Ctrl-C)"
    assert 2 <= sum(t["state"] == "complete" for t in rec["search"]["trials"]) < 40
    assert not rec["final_timing"]  # certified on the search's own bits and rounds
    assert out.startswith(("certified:", "no certified variant:"))


@pytest.mark.slow
def test_a_search_the_budget_ended_is_replayed_by_the_same_command(tmp_path):
    """A warm rerun reuses the earlier trials in seconds: with the budget left it would go on
    searching and could answer differently. It replays the earlier search instead."""
    # The default space (every technique's settings): far more points than a minute holds.
    args = ["recommend", *BUDGET, "--within", MARGIN, "--budget", "60s", "--patience", "1000",
            "--store", str(tmp_path / "s.db"), "--quiet"]
    env = {"COMPRESSION_BENCH_CACHE": str(tmp_path / "cache")}
    docs = []
    for name in ("cold", "warm"):
        p = run_cli(*args, "--json", str(tmp_path / f"{name}.json"), env=env)
        assert p.returncode == 0, p.stderr
        docs.append(json.loads((tmp_path / f"{name}.json").read_text())["recommendation"])
    cold, warm = docs
    assert "budget" in cold["search"]["ended"], cold["search"]["ended"]
    # The budget ended the search, not the final timing: the candidates were timed again,
    # in at least six paired rounds, and the interval says so.
    assert cold["final_timing"] == bool(cold["certificate"]["candidates"])
    if cold["certificate"]["winner"] is not None:
        speed = cold["certificate"]["speedup"]
        assert speed["timed"] == "final" and speed["rounds"] >= 6
        assert "95% interval, " in cold["certificate"]["reason"]
    assert "replayed" in warm["search"]["ended"], warm["search"]["ended"]
    measured = [t["name"] for t in cold["search"]["trials"]
                if t.get("error") != "stopped before it was measured"]
    assert [t["name"] for t in warm["search"]["trials"]] == measured
    keep = ("order", "name", "b", "c", "n", "lower_pts", "interval_pts", "certified")
    assert [{k: t[k] for k in keep} for t in cold["certificate"]["candidates"]] == \
        [{k: t[k] for k in keep} for t in warm["certificate"]["candidates"]]
    assert cold["certificate"]["winner"] == warm["certificate"]["winner"]
    # Its final timing is replayed too: timed again, two candidates within noise of each
    # other were named by the second pass's noise (CI saw either winner).
    assert warm["certificate"]["speedup"] == cold["certificate"]["speedup"]
    assert (warm.get("timing_from") is not None) == cold["final_timing"]
