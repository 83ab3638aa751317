"""`run` on a language model (issue 35), on tiny-lm in seconds: every cell of the issue's
grid of techniques built through the registry, scored paired with the baseline on the same
windows, timed together; the JSON and the store hold what recomputes every figure; bad input
is one line and exit 2."""

from __future__ import annotations

import json
import sqlite3

import pytest
import torch
from helpers import run_cli

from benchmarks.measure.environment import default_threads
from benchmarks.measure.lm_quality import PairedOutcomes
from benchmarks.measure.memory import state_bytes
from benchmarks.views.lm import lm_answer
from benchmarks.zoo.lm import build_lm
from optimizers import registry
from optimizers.lm import decoder_linears, int4, int8, prune, prune_mask
from optimizers.settings import Int4Settings, Int8Settings, PruneSettings

SMALL = ["--max-windows", "16", "--window", "64", "--prompt-tokens", "16", "--new-tokens",
         "4", "--timing-rounds", "3", "--quiet"]


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """The issue's command on tiny-lm (INT4 in groups of 32: tiny-lm's layers are 64 wide)."""
    folder = tmp_path_factory.mktemp("lm")
    out, store = folder / "out.json", folder / "results.db"
    done = run_cli("run", "--model", "tiny-lm", "--dataset", "text", "--int8",
                   "weight-only,dynamic", "--int4", "32", "--prune", "0.5", "--prune-method",
                   "wanda", "--amp", "bf16", "--json", str(out), "--store", str(store), *SMALL)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text()), store, done.stdout


def test_every_cell_is_built_and_carries_quality_speed_memory_and_size(grid):
    document, _, stdout = grid
    names = [v["name"] for v in document["variants"]]
    assert names == ["baseline", "prune-wanda-0.5", "int8-weight-only", "int8-dynamic",
                     "int4-g32", "amp-bf16"]
    for v in document["variants"]:
        assert v["ok"], v["error"]
        q = v["quality"]
        assert q["variant"]["perplexity"] > 1
        lo, hi = q["delta_nll_interval"]
        assert lo <= q["delta_nll"] <= hi
        assert 0 <= q["agreement"] <= 1 and q["kl_mean"] >= 0 and q["kl_p99"] >= 0
        (cell,) = v["cells"]
        assert cell["mode"] == "eager" and cell["rounds"] == 3
        assert cell["prefill_ms"] > 0 and cell["decode_ms_per_token"] > 0
        assert cell["peak_bytes"] >= v["size"]["weights_bytes"] > 0
        assert cell["decode_speedup"]["ci"][0] <= cell["decode_speedup"]["ratio"] <= \
            cell["decode_speedup"]["ci"][1]
        assert v["name"] in stdout
    by = {v["name"]: v for v in document["variants"]}
    assert by["baseline"]["quality"]["delta_nll"] == 0
    # The text's record: windows, split sizes, the embedded text's hash.
    text = document["environment"]["text"]
    assert text["windows"] == 16 and text["window"] == 64 and text["provenance"]["sha256"]
    assert by["prune-wanda-0.5"]["size"]["linear_sparsity"] == pytest.approx(0.5, abs=0.02)
    assert by["prune-wanda-0.5"]["config"]["prune"]["calibration_tokens"] == \
        text["calibration_windows"] * 64
    assert by["int4-g32"]["config"]["int4"] == {
        "group_size": 32, "layers": 14, "float_layers": 0, "weights": "Int4OpaqueTensor",
        "path": "torchao"}


def test_the_cells_are_timed_on_all_cores_but_one_pinned_as_an_image_sweep(grid):
    document, _, _ = grid
    # The documented rule (one thread on two cores): taking every core, INT8 decoded no
    # faster than fp32 where at one thread of two it reached 1.28x.
    threads = document["environment"]["threads"]
    assert threads == default_threads()
    for v in document["variants"]:
        (cell,) = v["cells"]
        assert cell["threads"] == threads
        assert len(cell["timing"]["pinning"]["cores"]) == threads


def test_int8_weight_only_barely_changes_nll_and_packs_smaller(grid):
    document, _, _ = grid
    by = {v["name"]: v for v in document["variants"]}
    w8 = by["int8-weight-only"]
    # On tiny-lm's random weights the change is a few 1e-4 per token, which 12 windows can
    # resolve (its interval may exclude 0: a finding, however small); whether it is within
    # noise on a real model is smollm2-135m's run (make perf).
    assert abs(w8["quality"]["delta_nll"]) < 2e-3
    assert w8["quality"]["nll_within_noise"] == (
        w8["quality"]["delta_nll_interval"][0] <= 0 <= w8["quality"]["delta_nll_interval"][1])
    fp32 = by["baseline"]["size"]["weights_bytes"]
    # Decoder linears at 1 byte a weight (+ scales) against 4; the tied embedding as it was.
    assert by["int4-g32"]["size"]["weights_bytes"] < w8["size"]["weights_bytes"] < 0.6 * fp32


def test_figures_recompute_from_the_stored_per_window_outcomes(grid):
    document, store, _ = grid
    db = sqlite3.connect(store)
    kind, status = db.execute("SELECT kind, status FROM runs WHERE run_id=?",
                              (document["run_id"],)).fetchone()
    assert (kind, status) == ("lm", "complete")
    rows = db.execute("SELECT name, result FROM variants WHERE run_id=? ORDER BY position",
                      (document["run_id"],)).fetchall()
    assert [name for name, _ in rows] == [v["name"] for v in document["variants"]]
    stored = json.loads(rows[3][1])
    recomputed = PairedOutcomes.from_dict(stored["outcomes"]).summary()
    assert json.loads(json.dumps(recomputed)) == stored["quality"] == \
        document["variants"][3]["quality"]
    assert stored["cells"][0]["samples"]["decode_ms"] == \
        document["variants"][3]["cells"][0]["samples"]["decode_ms"]


def test_the_answer_names_a_variant_only_when_it_is_faster_beyond_its_interval(grid):
    document, _, stdout = grid
    answer = document["answer"]
    assert answer == lm_answer(document["variants"]).to_dict()
    assert f"answer: {answer['line']}" in stdout
    variants = json.loads(json.dumps(document["variants"]))
    # The other cells as measured can be faster on some CPUs (amp-bf16 decodes 2.9-6.6x the
    # baseline's speed on an AMX Xeon): script them within noise, so the answer's rule is what
    # is tested, not this CPU.
    for v in variants[1:]:
        for c in v.get("cells") or []:
            if c.get("decode_speedup"):
                c["decode_speedup"] = {**c["decode_speedup"], "ratio": 1.0, "ci": [0.9, 1.1]}
    # Make int8 weight-only's cell clearly faster: the answer names it, with its figures.
    cell = variants[2]["cells"][0]
    cell["decode_speedup"] = {"ratio": 1.8, "ci": [1.5, 2.1], "rounds": 3, "resamples": 2000}
    variants[2]["quality"]["nll_within_noise"] = True
    named = lm_answer(variants)
    assert (named.variant, named.mode, named.decode_speedup) == ("int8-weight-only", "eager",
                                                                 1.8)
    assert "1.80x" in named.line and "[1.50, 2.10]" in named.line
    # A speed-up holds at the threads it was timed on: the answer names them.
    threads = document["environment"]["threads"]
    at = f"{threads} thread{'s' if threads > 1 else ''}"
    assert named.threads == threads and named.line.startswith(f"int8-weight-only (eager, "
                                                                f"{at}): ")
    # Faster but its quality change outside noise: not an answer.
    variants[2]["quality"]["nll_within_noise"] = False
    assert lm_answer(variants).variant is None
    # Within noise, its interval touching 1: not faster.
    variants[2]["quality"]["nll_within_noise"] = True
    cell["decode_speedup"]["ci"] = [0.98, 2.1]
    refused = lm_answer(variants)
    assert refused.variant is None and "Int8Tensor" in refused.line
    assert f"on this CPU at {at} (kernels that ran: " in refused.line
    for v in variants[1:]:
        v["quality"]["nll_within_noise"] = False
    assert "no variant's NLL change is within noise of zero" in lm_answer(variants).line
    assert "no variant besides the baseline" in lm_answer(variants[:1]).line


@pytest.mark.slow  # torch.compile of two variants: about a minute
def test_int4_is_timed_eager_and_compiled_with_the_mode_named(tmp_path):
    out = tmp_path / "out.json"
    done = run_cli("run", "--model", "tiny-lm", "--dataset", "text", "--int4", "32",
                   "--runtime", "eager,compile", "--json", str(out), "--store",
                   str(tmp_path / "results.db"), *SMALL)
    assert done.returncode == 0, done.stderr[-2000:]
    # With --quiet, the stored run's line alone: no library chatter (torchao's, Inductor's).
    assert done.stderr.strip().startswith("run ") and len(done.stderr.splitlines()) == 1, \
        done.stderr
    document = json.loads(out.read_text())
    cells = {(v["name"], c["mode"]): c for v in document["variants"] for c in v["cells"]}
    assert set(cells) == {(name, mode) for name in ("baseline", "int4-g32")
                          for mode in ("eager", "compile")}
    assert all(c["ok"] and c["mode"] == mode for (_, mode), c in cells.items())
    # Each speed-up is against the baseline in its own mode.
    assert cells[("baseline", "compile")]["decode_speedup"]["ratio"] == 1.0
    rows = [line.split() for line in done.stdout.splitlines()[1:5]]
    assert {(r[0], r[1]) for r in rows} == set(cells)


@pytest.mark.parametrize("args, says", [
    (["--model", "mlp", "--dataset", "text"], "takes a language model"),
    (["--model", "tiny-lm", "--dataset", "digits"], "runs on a text data set"),
    (["--model", "mlp", "--dataset", "digits", "--int4", "32"],
     "int4 does not apply to an image model"),
    (["--model", "mlp", "--dataset", "digits", "--int8", "weight-only"],
     "--int8 weight-only is not for an image model"),
    (["--model", "tiny-lm", "--dataset", "text", "--int8", "static"],
     "--int8 static is not for a language model; it takes weight-only, dynamic"),
    (["--model", "tiny-lm", "--dataset", "text", "--distill"],
     "distill does not apply to a language model"),
    (["--model", "tiny-lm", "--dataset", "text", "--runtime", "eager,ort"],
     "a language model runs under eager, compile"),
    (["--model", "tiny-lm", "--dataset", "text", "--prune", "0.6", "--prune-method",
      "wanda-2:4"], "its ratio is 0.5"),
    (["--model", "tiny-lm", "--dataset", "text", "--int4", "48"],
     "int4.group_size must be one of 32, 64, 128, 256"),
    (["--model", "tiny-lm", "--dataset", "text", "--window", "1024"],
     "is longer than tiny-lm's context (512 tokens)"),
    (["--model", "tiny-lm", "--dataset", "text", "--int8", "dynamic", "--int4", "32",
      "--combine"], "a variant takes one"),
    (["--model", "tiny-lm", "--dataset", "text", "--prune", "0.5", "--finetune-epochs", "1"],
     "does not fine-tune"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, says):
    from benchmarks.cli.main import main  # in this process: the refusals load no model
    store = tmp_path / "results.db"
    assert main(["run", *args, "--store", str(store), "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines
    assert not store.exists() or not sqlite3.connect(store).execute(
        "SELECT COUNT(*) FROM runs").fetchone()[0]


def test_a_binary_text_file_is_refused_before_the_store(tmp_path):
    binary = tmp_path / "data.txt"
    binary.write_bytes(b"\x00\x01\x02" * 1000)
    store = tmp_path / "results.db"
    done = run_cli("run", "--model", "tiny-lm", "--dataset", f"text:{binary}", "--store",
                   str(store), "--quiet")
    assert done.returncode == 2 and done.stderr.strip() == \
        f"error: text file {binary} is binary, not text"
    assert not store.exists() or not sqlite3.connect(store).execute(
        "SELECT COUNT(*) FROM runs").fetchone()[0]


# ---- the techniques themselves ----------------------------------------------------------------

def test_prune_masks_keep_what_each_method_says():
    torch.manual_seed(0)
    score = torch.rand(6, 16)
    two_four = prune_mask(score, "wanda-2:4", 0.5)
    assert (two_four.reshape(6, 4, 4).sum(-1) == 2).all()  # 2 of every 4, row by row
    kept_by_row = prune_mask(score, "wanda", 0.25).sum(1)
    assert (kept_by_row == 12).all()  # Wanda: the same count dropped from every row
    layer = prune_mask(score, "magnitude", 0.25)
    assert int(layer.sum()) == 72 and score[layer == 0].max() <= score[layer == 1].min()


def test_each_technique_leaves_the_model_it_was_given_and_the_head_tied():
    lm = build_lm("tiny-lm")
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    calibration = torch.randint(0, 256, (4, 32))
    for apply, settings in ((prune, PruneSettings(0.5, "magnitude-2:4")),
                            (int8, Int8Settings("weight-only")), (int4, Int4Settings(32))):
        out, config = apply(lm.model, settings, calibration)
        assert out is not lm.model and config
        assert out.lm_head.weight is out.model.embed_tokens.weight  # still tied, still fp32
        assert "lm_head" not in decoder_linears(out)
    after = lm.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_stored_bytes_count_a_tied_embedding_once_and_quantized_weights_packed():
    lm = build_lm("tiny-lm")
    # parameters() lists a tied weight once; the rotary frequencies are not state.
    assert state_bytes(lm.model) == sum(p.numel() for p in lm.model.parameters()) * 4
    quantized, _ = int8(lm.model, Int8Settings("weight-only"), torch.randint(0, 256, (2, 16)))
    layers = decoder_linears(lm.model).values()
    weights, rows = sum(m.weight.numel() for m in layers), sum(m.out_features for m in layers)
    # Each decoder weight: 4 bytes -> 1, plus a scale (and a zero point) per output row.
    saved = state_bytes(lm.model) - state_bytes(quantized)
    assert 3 * weights - 8 * rows <= saved < 3 * weights


def test_the_registry_says_which_family_each_technique_takes():
    assert [t.name for t in registry.techniques("lm")] == ["prune", "int8", "int4", "amp"]
    assert "int4" not in [t.name for t in registry.techniques("image")]
    with pytest.raises(ValueError, match="needs its lm_apply"):
        registry.Technique("toy-lm", Int4Settings, 99, "optimizers.lm:not_for_images", "toy",
                           families=("lm",))


def test_layers_int4_leaves_float_are_counted_and_said():
    lm = build_lm("tiny-lm")  # its layers are 64 and 128 wide: groups of 128 fit only some
    out, config = int4(lm.model, Int4Settings(128), torch.randint(0, 256, (2, 16)))
    int4_config = config["int4"]
    assert int4_config["float_widths"] == [64]
    assert int4_config["layers"] == 2 and int4_config["float_layers"] == 12  # the down projs
    from benchmarks.views.lm import lm_notes
    (note,) = lm_notes([{"name": "int4-g128", "config": config}])
    assert note == ("int4-g128: 12 of 14 linear layers stay float: their input width (64) is "
                    "not a multiple of the group size 128")


def test_the_html_report_of_a_language_model_run(grid, tmp_path):
    document, store, _ = grid
    html = tmp_path / "lm.html"
    done = run_cli("report", document["run_id"], "--store", str(store), "--html", str(html))
    assert done.returncode == 0, done.stderr[-1500:]
    text = html.read_text()
    assert document["answer"]["line"].split(":")[0] in text
    cells = text.split('id="cells"')[1].split("</table>")[0]
    assert cells.count("<tr") == 1 + 6  # the header, a row per cell
    assert document["environment"]["text"]["provenance"]["sha256"] in text  # the text read
    assert 'data-chart="lm-tradeoff"' in text
    assert "<script src=" not in text and "<link " not in text  # draws offline
    compare = run_cli("report", document["run_id"], "--compare", document["run_id"], "--store",
                      str(store), "--html", str(tmp_path / "x.html"))
    assert compare.returncode == 2 and "reported alone" in compare.stderr


def test_a_swept_setting_draws_its_curve(tmp_path):
    out, store = tmp_path / "out.json", tmp_path / "r.db"
    done = run_cli("run", "--model", "tiny-lm", "--dataset", "text", "--prune", "0.2,0.4,0.6",
                   "--prune-method", "magnitude", "--json", str(out), "--store", str(store),
                   *SMALL)
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads(out.read_text())
    from benchmarks.views.lm import lm_curve_figure, lm_curves
    (axis, points), = lm_curves(document["variants"]).items()
    assert axis == "prune.ratio" and [p["value"] for p in points] == [0.2, 0.4, 0.6]
    # More pruned, further from the baseline: the curve says what the sweep found.
    assert points[0]["delta_nll"] != points[2]["delta_nll"]
    figure = lm_curve_figure(axis, points)
    assert [t.name for t in figure.data] == ["NLL change per token", "decode speed-up (eager)"]
    html = tmp_path / "r.html"
    assert run_cli("report", document["run_id"], "--store", str(store), "--html",
                   str(html)).returncode == 0
    assert 'data-chart="lm-curve-prune.ratio"' in html.read_text()


def test_the_baseline_paired_with_itself_is_what_a_second_pass_would_give():
    from benchmarks.measure.lm_quality import evaluate, evaluate_pair
    from benchmarks.run.lm_runner import _itself
    lm = build_lm("tiny-lm")
    ids = torch.randint(0, 256, (4, 32))
    scored = torch.ones(4, 31, dtype=torch.bool)
    assert _itself(evaluate(lm.model, ids, scored)).summary() == \
        evaluate_pair(lm.model, lm.model, ids, scored).summary()
