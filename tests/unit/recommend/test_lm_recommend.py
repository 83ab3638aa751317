"""`recommend` on a language model (issue 35): the grid's cells measured whole, candidates
chosen on the search windows, certified on the certify windows with a paired test over windows;
the certificate recomputes from the stored per-window outcomes; bad input is one line, exit 2."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest
from helpers import run_cli
from scipy import stats

from benchmarks.recommend.certificate import Tested as Candidate
from benchmarks.recommend.lm_certificate import certify_lm, recompute, window_test
from benchmarks.recommend.split import Split

SMALL = ["--max-windows", "24", "--window", "64", "--prompt-tokens", "16", "--new-tokens",
         "4", "--timing-rounds", "4", "--quiet"]


# ---- the test over windows --------------------------------------------------------------------

def test_with_equal_windows_it_is_the_one_sample_t_test_of_the_window_differences():
    """Windows of equal length: the ratio estimator is the mean of per-window accuracy
    changes, its standard error theirs; the p-value is SciPy's one-sided t-test at -margin."""
    tokens = [50] * 12
    base = [20, 22, 19, 25, 30, 21, 18, 24, 26, 23, 20, 22]
    variant = [19, 22, 18, 24, 31, 20, 18, 22, 25, 23, 19, 21]
    margin_pts = 3.0
    test = window_test(variant, base, tokens, margin_pts, 0.95)
    d = [(v - b) / 50 for v, b in zip(variant, base)]
    want = stats.ttest_1samp([x + margin_pts / 100 for x in d], 0.0, alternative="greater")
    assert test["p_value"] == pytest.approx(want.pvalue, rel=1e-9)
    assert test["theta_pts"] == pytest.approx(100 * sum(d) / len(d))
    assert test["rejected"] == (test["p_value"] < 0.05) == (test["lower_pts"] > -margin_pts)
    lo, hi = test["interval_pts"]
    assert lo < test["lower_pts"] < test["theta_pts"] < hi
    assert (test["b"], test["c"], test["n"]) == (1, 8, 12)


def test_a_margin_the_windows_cannot_hold_is_not_certified():
    tokens = [40] * 10
    base = [20] * 10
    variant = [12, 14, 13, 15, 12, 16, 11, 13, 14, 12]  # about 18 points lower
    test = window_test(variant, base, tokens, 5.0, 0.95)
    assert not test["rejected"] and test["lower_pts"] < -5 and test["p_value"] > 0.05


def test_a_cell_scoring_every_window_as_the_baseline_does_passes_with_no_spread():
    test = window_test([5, 7, 9], [5, 7, 9], [30, 30, 29], 0.5, 0.95)
    assert test["rejected"] and test["theta_pts"] == 0 == test["lower_pts"]
    assert test["interval_pts"] == [0, 0] and test["p_value"] == 0


def _record(name, correct, base, tokens, decode, mode="eager"):
    return {"name": name, "ok": True, "size": {"weights_bytes": 1000},
            "outcomes": {"baseline": {"correct": base, "tokens": tokens, "nll": [1.0] * len(base)},
                         "variant": {"correct": correct, "tokens": tokens,
                                     "nll": [1.0] * len(base)}},
            "cells": [{"mode": mode, "ok": True, "samples": {"decode_ms": decode}}]}


def test_the_sequence_stops_at_its_first_failure_and_the_winner_is_faster_beyond_noise():
    n = 12
    tokens, base = [40] * n, [20] * n
    split = Split(0, 2 * n, tuple(range(0, 2 * n, 2)), tuple(range(1, 2 * n, 2)))
    records = [_record("baseline", base * 2, base * 2, tokens * 2, [10.0, 10.2, 9.9, 10.1]),
               _record("good", [20, 21, 20, 19] * 6, base * 2, tokens * 2,
                       [8.0, 8.1, 7.9, 8.0]),
               _record("bad", [12] * (2 * n), base * 2, tokens * 2, [5.0, 5.1, 4.9, 5.0]),
               _record("fastest", base * 2, base * 2, tokens * 2, [4.0, 4.1, 3.9, 4.0])]
    sequence = [Candidate(0, "good@eager", 1.25, 0.0), Candidate(1, "bad@eager", 2.0, 0.0),
                Candidate(2, "fastest@eager", 2.5, 0.0)]
    cert = certify_lm(sequence, records, split, margin_pts=2.0, margin="2pt",
                      confidence=0.95, objective="p50", reference="baseline@eager")
    assert [t.certified for t in cert.candidates] == [True, False, False]
    assert cert.stopped_at == 1 and not cert.candidates[2].tested
    assert cert.winner == "good@eager"
    assert cert.speedup["faster"] and cert.speedup["ci"][0] > 1
    assert cert.speedup["ratio"] == pytest.approx(10.05 / 8.0)


# ---- the command ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def certified(tmp_path_factory):
    """INT8 on tiny-lm by stored size: a cell smaller than the baseline beyond doubt, whose
    next-token accuracy a 5-point margin holds."""
    folder = tmp_path_factory.mktemp("lmrec")
    out, store = folder / "out.json", folder / "results.db"
    done = run_cli("recommend", "--model", "tiny-lm", "--dataset", "text", "--int8",
                   "weight-only,dynamic", "--objective", "size", "--within", "5pt",
                   "--json", str(out), "--store", str(store), *SMALL)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text()), store, done.stdout


def test_recommend_on_a_language_model_certifies_a_cell(certified):
    document, _, stdout = certified
    rec = document["recommendation"]
    cert = rec["certificate"]
    assert cert["winner"] in {"int8-weight-only@eager", "int8-dynamic@eager"}
    assert stdout.startswith(f"certified: {cert['winner']} is within 5 points")
    winner = next(t for t in cert["candidates"] if t["name"] == cert["winner"])
    assert winner["test"] == "paired t over windows" and winner["lower_pts"] > -5
    assert winner["n"] == rec["split"]["certify_size"] > 0
    # Smaller by its stored bytes: a counted ratio, above 1.
    assert cert["speedup"]["ratio"] > 1 and cert["speedup"]["faster"]
    # The search read the search windows only: its changes are on them.
    assert {t["name"] for t in rec["search"]["trials"]} == {"int8-weight-only@eager",
                                                           "int8-dynamic@eager"}
    assert rec["recipe"]["command"].startswith("compression-bench run --model tiny-lm")
    assert "paired t over windows" in stdout and "evaluation windows" in stdout


def test_the_certificate_recomputes_from_the_stored_per_window_outcomes(certified):
    document, store, _ = certified
    assert recompute(document).to_dict() == document["recommendation"]["certificate"]
    assert document["recommendation"]["certificate"]["device"].startswith("cpu (")
    from benchmarks.store.database import ResultsStore
    run = ResultsStore(store).run(document["run_id"])
    assert run["kind"] == "lm" and run["recommendation"] == json.loads(
        json.dumps(document["recommendation"]))
    # From the store alone too, and a changed outcome changes it.
    again = {"variants": run["variants"], "recommendation": run["recommendation"]}
    assert recompute(again).to_dict() == document["recommendation"]["certificate"]
    winner = document["recommendation"]["certificate"]["winner"].split("@")[0]
    record = next(v for v in again["variants"] if v["name"] == winner)
    certify = again["recommendation"]["split"]["certify"]
    for i in certify:
        record["outcomes"]["variant"]["correct"][i] = 0
    changed = recompute(again).to_dict()
    lowered = next(t for t in changed["candidates"] if t["name"].startswith(winner))
    assert lowered["theta_pts"] < next(
        t for t in document["recommendation"]["certificate"]["candidates"]
        if t["name"].startswith(winner))["theta_pts"]
    assert math.isfinite(lowered["lower_pts"])


@pytest.mark.parametrize("args, says", [
    (["--budget", "5m"], "drop --budget"),
    (["--trials", "4"], "drop --trials"),
    (["--objective", "p99"], "takes --objective p50|throughput|size|memory"),
    (["--executor", "ray"], "takes no --executor ray"),
    (["--int4", "48"], "int4.group_size must be one of 32, 64, 128, 256"),
    (["--max-windows", "4", "--certify-fraction", "0.1"], "needs two or more"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, says):
    from benchmarks.cli.main import main
    store = tmp_path / "results.db"
    assert main(["recommend", "--model", "tiny-lm", "--dataset", "text", *args, "--store",
                 str(store), "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines
    assert not store.exists() or not sqlite3.connect(store).execute(
        "SELECT COUNT(*) FROM runs").fetchone()[0]


@pytest.mark.slow
def test_without_a_technique_flag_the_grid_is_every_techniques_own(tmp_path):
    """No technique flag: each language-model technique's grid (DEFAULT_GRID), every variant
    scored and timed, recomputable from the JSON."""
    out = tmp_path / "out.json"
    done = run_cli("recommend", "--model", "tiny-lm", "--dataset", "text", "--within", "5pt",
                   "--json", str(out), "--store", str(tmp_path / "results.db"), *SMALL,
                   timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    rec = json.loads(out.read_text())["recommendation"]
    cells = {t["name"] for t in rec["search"]["trials"]}
    assert len(cells) == 10 - 1  # ten variants under eager, less the reference
    assert {"int4-g32@eager", "int8-weight-only@eager", "amp-bf16@eager"} <= cells, cells
    assert recompute(json.loads(out.read_text())).to_dict() == rec["certificate"]


def test_every_compiled_cell_is_compiled_past_dynamos_shared_recompile_limit(tmp_path):
    """Compiled models share transformers' code objects and Dynamo's recompile limit is
    counted over all of them: without a limit per cell, the third compiled cell of this grid
    (the baseline and both INT8 modes) hit it and ran eagerly, with a warning (seen with the
    limit put back to Dynamo's 8)."""
    out = tmp_path / "out.json"
    done = run_cli("recommend", "--model", "tiny-lm", "--dataset", "text", "--int8",
                   "weight-only,dynamic", "--runtime", "eager,compile", "--within", "5pt",
                   "--json", str(out), "--store", str(tmp_path / "results.db"), *SMALL,
                   timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "recompile_limit" not in done.stderr, done.stderr[-2000:]
    rec = json.loads(out.read_text())["recommendation"]
    cells = {t["name"] for t in rec["search"]["trials"]}
    assert cells == {"baseline@compile", "int8-dynamic@compile", "int8-dynamic@eager",
                     "int8-weight-only@compile", "int8-weight-only@eager"}


def test_the_html_report_leads_with_the_certificate(certified, tmp_path):
    document, store, stdout = certified
    html = tmp_path / "rec.html"
    done = run_cli("report", document["run_id"], "--store", str(store), "--html", str(html))
    assert done.returncode == 0, done.stderr[-1500:]
    text = html.read_text()
    assert text.index('id="certificate"') < text.index('id="answer"')
    table = text.split('id="candidates"')[1].split("</table>")[0]
    assert table.count("<tr") == 1 + len(document["recommendation"]["certificate"]["candidates"])
    assert "paired t over windows" in table
    assert stdout.splitlines()[0].split(" (")[0] in text.replace("&#39;", "'")
