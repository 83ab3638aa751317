"""A language model's sensitivity map (issue 35): each decoder layer, or each projection kind,
changed alone by a technique and scored paired with the baseline on the same windows; rows
most sensitive first, each with its interval, recomputing from its stored per-window outcomes;
the Results page draws it; bad input is one line, exit 2."""

from __future__ import annotations

import json
import sqlite3

import pytest
from helpers import ROOT, run_cli, scaled

from benchmarks.measure.lm_quality import PairedOutcomes
from benchmarks.sensitivity.lm_map import lm_groups, screening_windows

SMALL = ["--max-windows", "16", "--window", "64", "--quiet"]
PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def test_groups_are_decoder_layers_or_projection_kinds_in_model_order():
    names = [f"model.layers.{i}.{part}" for i in (0, 1, 10)
             for part in ("self_attn.q_proj", "mlp.down_proj")]
    assert lm_groups(names, "layer") == {
        "layer 0": names[0:2], "layer 1": names[2:4], "layer 10": names[4:6]}
    assert lm_groups(names, "projection") == {"q_proj": names[0::2],
                                              "down_proj": names[1::2]}


def test_screening_windows_are_a_seeded_share_of_the_evaluation_windows():
    evaluation = tuple(range(3, 40))
    first = screening_windows(evaluation, 0.5, 0)
    assert first == screening_windows(evaluation, 0.5, 0) == sorted(first)
    assert set(first) <= set(evaluation) and len(first) == round(0.5 * len(evaluation))
    assert first != screening_windows(evaluation, 0.5, 1)
    assert len(screening_windows(evaluation, 0.01, 0)) == 2


@pytest.fixture(scope="module")
def int4_map(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lmmap")
    out, store = folder / "map.json", folder / "results.db"
    done = run_cli("sensitivity", "--model", "tiny-lm", "--dataset", "text", "--technique",
                   "int4", "--group-size", "32", "--by", "projection", "--json", str(out),
                   "--store", str(store), *SMALL)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text()), store, done.stdout


def test_each_projection_kind_is_changed_alone_most_sensitive_first(int4_map):
    document, _, stdout = int4_map
    rows = document["rows"]
    assert sorted(r["group"] for r in rows) == sorted(PROJECTIONS)
    assert [r["delta_nll"] for r in rows] == sorted((r["delta_nll"] for r in rows),
                                                   reverse=True)
    for r in rows:
        assert r["error"] is None and r["layers"] == 2  # tiny-lm: two decoder layers
        assert r["config"]["int4"]["layers"] == 2 and r["config"]["int4"]["group_size"] == 32
        assert all(name.endswith(r["group"]) for name in r["names"])
        lo, hi = r["delta_nll_interval"]
        assert lo <= r["delta_nll"] <= hi
        assert r["within_noise"] == (lo <= 0 <= hi)
        assert r["group"] in stdout
    assert document["map"]["by"] == "projection" and document["map"]["windows"] >= 2


def test_every_row_recomputes_from_its_stored_per_window_outcomes(int4_map):
    document, store, _ = int4_map
    from benchmarks.store.database import ResultsStore
    (run,) = ResultsStore(store).runs(kind="sensitivity")
    assert run["spec"]["family"] == "lm" and run["environment"]["sensitivity"]["cells"] == 7
    for stored in run["variants"]:
        again = PairedOutcomes.from_dict(stored["outcomes"]).summary()
        assert again["delta_nll"] == pytest.approx(stored["delta_nll"], abs=1e-12)
        assert again["delta_nll_interval"] == pytest.approx(stored["delta_nll_interval"])


def test_pruning_by_layer_maps_each_level(tmp_path):
    out = tmp_path / "map.json"
    done = run_cli("sensitivity", "--model", "tiny-lm", "--dataset", "text", "--technique",
                   "prune.wanda", "--levels", "0.3,0.6", "--by", "layer", "--json", str(out),
                   "--no-store", *SMALL)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert sorted((r["group"], r["level"]) for r in rows) == [
        ("layer 0", 0.3), ("layer 0", 0.6), ("layer 1", 0.3), ("layer 1", 0.6)]
    for r in rows:
        assert r["config"]["prune"]["layers"] == 7
        assert r["config"]["prune"]["sparsity"] == pytest.approx(r["level"], abs=0.02)
    by = {(r["group"], r["level"]): r for r in rows}
    for layer in ("layer 0", "layer 1"):  # more pruning, a larger change in KL
        assert by[(layer, 0.6)]["kl_mean"] > by[(layer, 0.3)]["kl_mean"]


@pytest.mark.parametrize("args, says", [
    (["--model", "tiny-lm", "--dataset", "text", "--technique", "prune.channel"],
     "does not map a language model; it takes int4, int8.weight-only"),
    (["--model", "seed_cnn", "--dataset", "digits", "--technique", "int4"],
     "does not map an image model; it takes prune.channel"),
    (["--model", "tiny-lm", "--dataset", "text", "--technique", "int4", "--max-drop", "1pt"],
     "writes no schedule yet"),
    (["--model", "tiny-lm", "--dataset", "text", "--technique", "int4", "--group-size", "48"],
     "sensitivity.group_size must be one of 32, 64, 128, 256"),
    (["--model", "tiny-lm", "--dataset", "text", "--technique", "int4", "--by", "head"],
     "sensitivity.by must be one of layer, projection"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, says):
    from benchmarks.cli.main import main
    store = tmp_path / "results.db"
    assert main(["sensitivity", *args, "--store", str(store), "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines
    assert not store.exists() or not sqlite3.connect(store).execute(
        "SELECT COUNT(*) FROM runs").fetchone()[0]


def test_the_results_page_draws_a_language_models_map(int4_map, monkeypatch):
    from streamlit.testing.v1 import AppTest
    document, store, _ = int4_map
    from benchmarks.store.database import ResultsStore
    (run,) = ResultsStore(store).runs(kind="sensitivity")
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(store))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=scaled(60))
    at.query_params["run"] = run["run_id"]
    at.switch_page("pages/results.py").run()
    assert not at.exception and not at.error, [e.value for e in at.exception]
    table = at.dataframe[0].value
    assert list(table["Group"]) == [r["group"] for r in document["rows"]]
    assert len(at.get("plotly_chart")) == 1
    assert any("int4 on tiny-lm, by projection" in c.value for c in at.caption)
