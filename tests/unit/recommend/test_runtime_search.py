"""Issue 34.1-2: the recommendation searches recipe x runtime, and a runtime trial's
certificate is earned by that runtime's own predictions.

A runtime registered here ("flip": eager PyTorch, with one certify example's prediction made
wrong, one the variant gets right) searched beside eager over one recipe: its certificate's
counts are the eager twin's moved by exactly that example, as its stored per-example bits
are; a runtime trial is named as its cell, reaches the recipe's command, and the space
counts recipes x runtimes."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks.cli.main import main
from benchmarks.recommend.split import make_split
from benchmarks.report.stats import unpack_bits
from benchmarks.runtimes.base import Prepared
from benchmarks.spec import runtimes

FLIP = "flip"
SPACE = ["--int8", "static", "--calibration-batches", "8", "--objective", "size"]
BUDGET = ["--epochs", "2", "--min-time", "0.05", "--timing-rounds", "6"]
CERTIFY: list = []        # (input, label) of each certify example, in the split's order
FLIPPED: list = []        # the input the runtime answers wrongly


def prepare(config, model, example, **_):
    """The runtime's prepare: the variant as built, wrong on the first certify example it
    gets right (its logits set to the next class)."""
    from benchmarks.runtimes.census import module_census
    with torch.inference_mode():
        target = next(x for x, y in CERTIFY if int(model(x[None]).argmax(1)) == y)
    FLIPPED[:] = [target]

    def fn(x):
        out = model(x)
        hit = (x.flatten(1) == target.flatten()).all(1)
        if hit.any():
            out = out.clone()
            wrong = (out[hit].argmax(1) + 1) % out.shape[1]
            out[hit] = torch.nn.functional.one_hot(wrong, out.shape[1]).to(out.dtype) * 100
        return out
    return Prepared(fn=fn, precision="int8", version="test", prepare_s=0.0,
                    ops=module_census(model).to_dict())


@pytest.fixture
def flip_runtime(monkeypatch):
    monkeypatch.setitem(runtimes._REGISTRY, FLIP, runtimes.Runtime(
        FLIP, "test: eager, one certify example answered wrongly", __name__))
    yield


def _certify_examples():
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.spec.sweep import SweepSpec
    from benchmarks.spec.variant import BASELINE
    sweep = prepare_sweep(SweepSpec(epochs=2, variants=(BASELINE,)))
    xs, ys = zip(*sweep.data.batches("test", 512))
    x, y = torch.cat(xs), torch.cat(ys)
    split = make_split(len(y), 0, 0.5)
    return [(x[i], int(y[i])) for i in split.certify], split


def test_a_runtime_trial_is_certified_on_that_runtimes_own_predictions(flip_runtime,
                                                                         tmp_path, capsys):
    CERTIFY[:], split = _certify_examples()
    out = tmp_path / "rec.json"
    code = main(["recommend", *SPACE, *BUDGET, "--runtime", f"eager,{FLIP}", "--within", "3pt",
                 "--store", str(tmp_path / "s.db"), "--json", str(out), "--quiet"])
    said = capsys.readouterr()
    assert code == 0, said.err
    doc = json.loads(out.read_text())
    rec = doc["recommendation"]
    assert rec["space"]["runtimes"] == ["eager", FLIP] and rec["space"]["size"] == 2
    winner_runtime = next(t["runtime"] for t in rec["search"]["trials"]
                          if t["name"] == rec["certificate"]["winner"])
    assert f"runtimes searched: eager, {FLIP} (each trial scored and timed from its " \
           f"runtime's own outputs); the winner runs under {winner_runtime}" in said.out
    trials = {t["name"]: t for t in rec["search"]["trials"]}
    assert set(trials) == {"int8-static", f"int8-static@{FLIP}"}, list(trials)
    assert trials[f"int8-static@{FLIP}"]["runtime"] == FLIP
    assert trials["int8-static"]["runtime"] == "eager"

    # The stored rows: the runtime trial's bits are the eager twin's but for the one example.
    rows = {v["name"]: v for v in doc["variants"]}
    n = split.n
    eager = unpack_bits(rows["int8-static"]["raw"]["correct_bits"], n)
    flipped = unpack_bits(rows[f"int8-static@{FLIP}"]["raw"]["correct_bits"], n)
    differ = [i for i in range(n) if eager[i] != flipped[i]]
    assert len(differ) == 1 and differ[0] in split.certify and eager[differ[0]]
    assert rows[f"int8-static@{FLIP}"]["runtime"]["name"] == FLIP

    # The certificate's counts: from each trial's own bits, so the runtime's are the eager
    # twin's moved by that one example (one fewer "right where the baseline was wrong", or
    # one more "wrong where it was right").
    tested = {t["name"]: t for t in rec["certificate"]["candidates"] if t["tested"]}
    assert set(tested) == set(trials), rec["certificate"]
    mine, twin = tested[f"int8-static@{FLIP}"], tested["int8-static"]
    assert (mine["c"] - mine["b"]) - (twin["c"] - twin["b"]) == 1
    # Which trial won, the recipe builds it again under its runtime.
    recipe = rec["recipe"]
    assert recipe["runtime"] == trials[rec["certificate"]["winner"]]["runtime"]
    if recipe["runtime"] == FLIP:
        assert f"--runtime eager,{FLIP}" in recipe["command"]
        assert recipe["spec"]["runtimes"] == ["eager", FLIP]


def test_the_space_counts_recipes_under_each_runtime_and_refuses_a_runtime_twice():
    from benchmarks.recommend.space import search_space
    one = search_space({("int8", "mode"): ("dynamic", "static")}, {"int8"})
    both = search_space({("int8", "mode"): ("dynamic", "static")}, {"int8"},
                        runtimes=("eager", "ort"))
    assert both.size() == 2 * one.size()
    assert "under eager, ort" in both.describe()
    # One recipe under two runtimes is a space to search (a single recipe alone is not).
    fixed = {("int8", "mode"): "static", ("int8", "calibration_batches"): 8}
    assert search_space(fixed, {"int8"}, runtimes=("eager", "ort")).size() == 2
    with pytest.raises(ValueError, match="no sweepable knob"):
        search_space(fixed, {"int8"})
    with pytest.raises(ValueError, match="twice"):
        search_space({}, {"int8"}, runtimes=("ort", "ort"))
    with pytest.raises(ValueError, match="unknown runtime 'tvm'"):
        search_space({}, {"int8"}, runtimes=("tvm",))


def test_the_command_refuses_an_unknown_runtime_in_one_line(capsys):
    assert main(["recommend", *SPACE, "--runtime", "eager,tvm"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "unknown runtime 'tvm'" in err[-1] and "openvino" in err[-1]


def test_an_openvino_trial_exports_the_artefact_its_certificate_counted(tmp_path, capsys):
    """``recommend --runtime eager,openvino``: the OpenVINO trial is certified on OpenVINO's
    own bits, stored without an eager row of its own, and its export (the IR, reloaded by
    OpenVINO) answers every test example as the stored bits say."""
    from benchmarks.export.variant import export_variant
    from benchmarks.store.database import ResultsStore
    if not runtimes.get("openvino").available():
        pytest.skip("OpenVINO is not installed here")
    out, store = tmp_path / "rec.json", tmp_path / "s.db"
    code = main(["recommend", *SPACE, *BUDGET, "--runtime", "eager,openvino", "--within",
                 "3pt", "--store", str(store), "--json", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    rec = doc["recommendation"]
    name = "int8-static@openvino"
    rows = {v["name"]: v for v in doc["variants"]}
    assert rows[name]["runtime"]["name"] == "openvino"
    assert rows[name]["runtime"]["precision"] == "int8"
    tested = {t["name"]: t for t in rec["certificate"]["candidates"] if t["tested"]}
    assert name in tested, rec["certificate"]
    assert rec["recipe"]["runtime"] == next(t["runtime"] for t in rec["search"]["trials"]
                                            if t["name"] == rec["certificate"]["winner"])
    run_id = ResultsStore(store).runs(with_variants=False)[0]["run_id"]
    card = export_variant(ResultsStore(store), run_id, name, tmp_path / "export")
    runtime = card["formats"]["runtime"]
    assert runtime["status"] == "written" and runtime["file"].endswith(".xml")
    assert runtime["predictions"] == {"examples": rows[name]["raw"]["n_test"], "differ": 0,
                                      "same": True}


def test_a_ray_search_under_another_runtime_is_refused_in_one_line():
    from benchmarks.recommend.pipeline import Recommender
    from benchmarks.recommend.request import RecommendRequest
    from benchmarks.recommend.space import search_space
    from benchmarks.spec.sweep import SweepSpec
    space = search_space({("int8", "mode"): "static", ("int8", "calibration_batches"): 8},
                         {"int8"}, runtimes=("eager", "ort"))
    with pytest.raises(ValueError, match="--executor ray searches eager trials only"):
        Recommender(RecommendRequest(within="3pt"), SweepSpec(), space,
                    ray_address="127.0.0.1:9")
