"""Runtime cells in a real sweep (the seed CNN on digits, one epoch): every variant under eager
and ONNX Runtime at batch 1 and 8, each cell one row, timed in the same interleaved rounds as
the variants, its ratios against the eager baseline at its own batch size; the contract's
runtime entry on every cell; a cell that cannot be built (a dynamic INT8 variant under ONNX
Runtime, a model the exporter cannot trace) fails with one line and the sweep goes on; an
exported cell writes the runtime's own file with its parity in the model card."""

from __future__ import annotations

import json

import pytest

from helpers import FAST

pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.slow

VARIANTS = ["baseline", "int8-static", "int8-dynamic"]
KEYS = [("eager", 8), ("ort", 1), ("ort", 8)]
ODD_MODEL = '''import torch
from torch import nn


class Odd(nn.Module):
    """Python control flow on a tensor's value: a traced graph cannot hold it."""

    def __init__(self, num_classes, in_channels):
        super().__init__()
        self.fc = nn.Linear(in_channels * 8 * 8, num_classes)

    def forward(self, x):
        x = x.flatten(1)
        if x.sum().item() > 0:
            x = x * 2
        return self.fc(x)


def build(num_classes, in_channels):
    return Odd(num_classes, in_channels)
'''


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.spec.sweep import SweepSpec
    from benchmarks.store.database import ResultsStore
    spec = SweepSpec.from_choices({("int8", "mode"): ("static", "dynamic")}, {"int8"},
                                  runtimes=("eager", "ort"), eval_batch_sizes=(1, 8),
                                  threads=1, timing_rounds=2, **FAST)
    sweep = prepare_sweep(spec)
    store = ResultsStore(tmp_path_factory.mktemp("cells") / "s.db")
    partial: dict = {}
    sweep.builds = []  # every variant built, in order (the sweep's and the cells')
    build = sweep.build_variant

    def counted(variant, *rest):
        sweep.builds.append(variant.name)
        return build(variant, *rest)
    sweep.build_variant = counted
    with store.record(model=spec.model, dataset=spec.dataset, device="cpu",
                      spec=spec.to_dict(), environment=sweep.environment) as recorder:
        results = []
        for index, result in enumerate(sweep.run(on_partial=lambda i, r: partial.setdefault(
                i, r.name))):
            recorder.add(result, index)
            results.append(result)
    return store, recorder.run_id, results, partial, sweep


def test_every_variant_runtime_and_batch_is_one_row_in_a_known_place(swept):
    _, _, results, partial, _ = swept
    names = [r.name for r in results]
    cells = [f"{v}{'' if rt == 'eager' else '@' + rt}{'' if b == 1 else f' b{b}'}"
             for v in VARIANTS for rt, b in KEYS]
    assert names == VARIANTS + cells
    assert partial == dict(enumerate(names))  # each row stored where it will stay
    for r in results:
        assert r.runtime["variant"] in VARIANTS and r.runtime["threads"] == 1
        assert r.axes["eval_batch_size"] == r.timing.batch_size == r.runtime["batch_size"]


def test_the_float_model_is_rebuilt_once_per_variant_for_all_its_graph_cells(swept):
    # int8-static's ort cells at b1 and b8 and its fp32 parity check share one rebuild of
    # the float model its conversion was applied to.
    *_, sweep = swept
    assert sweep.builds.count("int8-static (float)") == 1, sweep.builds


def test_cells_are_timed_in_the_same_interleaved_rounds(swept):
    _, _, results, _, _ = swept
    timed = [r for r in results if r.ok]
    assert len(timed) == len(results) - 2  # the dynamic INT8 variant's two ort cells
    for r in timed:
        assert r.timing.how["method"] == "interleaved" and r.timing.how["rounds"] == 2
        assert r.timing.how["variants_together"] == len(timed)
        assert len(r.timing.round_p50_ms) == 2 and r.timing.latency.n >= 2
    windows = {tuple(r.timing.how["window"]) for r in timed}
    assert len(windows) == 1  # one set of rounds for variants and cells alike


def test_a_cell_that_cannot_be_built_fails_in_one_line(swept):
    _, _, results, _, _ = swept
    failed = {r.name: r.error for r in results if not r.ok}
    assert set(failed) == {"int8-dynamic@ort", "int8-dynamic@ort b8"}
    for error in failed.values():
        assert error.startswith("ort failed: ") and "\n" not in error
        assert "dynamic INT8 variant is not deployed" in error


def test_the_runtime_entry_and_ratios_against_the_baseline_at_the_same_batch(swept):
    from benchmarks.report.document import RunReport
    store, run_id, results, _, _ = swept
    by = {r.name: r for r in results}
    cell = by["int8-static@ort b8"].runtime
    assert {"name", "version", "precision", "prepare_s", "first_call_ms", "parity",
            "ops"} <= set(cell)
    assert {"max_abs", "max_rel", "top1_agree", "top1_agree_ci",
            "p_value_vs_eager"} <= set(cell["parity"])
    assert {"int_kernels", "float_kernels", "quant_dequant", "int8_real"} <= set(cell["ops"])
    assert cell["name"] == "ort" and cell["precision"] == "int8" and cell["ops"]["int8_real"]
    assert cell["details"]["quantization"]["activations"] == "uint8"
    # Scored once:
    assert by["int8-static@ort b8"].scores.accuracy == by["int8-static@ort"].scores.accuracy
    assert by["int8-static b8"].scores.accuracy == by["int8-static"].scores.accuracy
    assert by["baseline@ort"].runtime["ops"]["verdict"] == "float"
    assert by["baseline@ort"].runtime["parity"]["top1_agree"] == 1.0
    # Which quantization of the float model is the more faithful to it: ORT's or eager's.
    versus = cell["parity"]["vs_fp32"]
    assert versus["n"] == by["int8-static@ort"].scores.n_test
    assert 0.9 <= versus["runtime_agree"] <= 1 and 0.9 <= versus["eager_agree"] <= 1
    assert versus["closer"] in ("runtime", "eager", "neither, within noise")
    # Where ORT's graph parts from the float model, layer by layer (said in an "off" note):
    # its first quantized layer is within rounding of the float model's activations.
    found = cell["parity"]["parts_ways"]
    assert found["layers"] and found["layers"][0]["error_steps"] < 1
    assert found["first"] is None or found["first"]["error_steps"] > 1
    assert "vs_fp32" not in by["baseline@ort"].runtime["parity"]  # nothing quantized it
    assert by["baseline"].runtime["name"] == "eager"

    doc = RunReport.from_stored(store.run(run_id)).document()
    rows = {v["name"]: v for v in doc["variants"]}
    assert rows["int8-static@ort b8"]["vs_baseline"]["reference"] == "baseline b8"
    assert rows["int8-static@ort"]["vs_baseline"]["reference"] == "baseline"
    ratio = rows["int8-static@ort b8"]["vs_baseline"]["p50_ms"]
    p50 = rows["int8-static@ort b8"]["latency_ms"]["p50"]
    assert ratio == pytest.approx(p50 / rows["baseline b8"]["latency_ms"]["p50"])
    assert json.loads(json.dumps(doc))["variants"][3]["runtime"]["name"] == "eager"
    table = RunReport.from_stored(store.run(run_id)).table()
    assert "speed-up vs eager fp32 baseline, batch 8, 1 thread(s):" in table


def test_an_exported_cell_writes_the_runtimes_own_file(swept, tmp_path):
    from benchmarks.export.variant import export_variant
    store, run_id, _, _, _ = swept
    card = export_variant(store, run_id, "int8-static@ort", tmp_path / "out")
    runtime = card["formats"]["runtime"]
    assert runtime["status"] == "written" and runtime["file"].endswith(".onnx")
    assert (tmp_path / "out" / runtime["file"]).exists()
    assert runtime["runtime"]["ops"]["int8_real"]
    assert runtime["parity"]["reloaded"]["top1_agree"] >= 0.95
    # The file answers each test example as the run's cell did (what a certificate counts).
    assert runtime["predictions"]["same"], runtime["predictions"]
    assert card["runtime"]["parity"] == runtime["parity"]["stored"]
    assert card["metrics"]["runtime"]["name"] == "ort"
    assert not (tmp_path / "out" / ".runtime").exists()


def test_a_model_the_exporter_cannot_trace_fails_its_cells_in_one_line(tmp_path):
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.spec.sweep import SweepSpec
    path = tmp_path / "odd.py"
    path.write_text(ODD_MODEL)
    spec = SweepSpec(model=f"{path}:build", runtimes=("eager", "ort"), threads=1, **FAST)
    results = list(prepare_sweep(spec).run())
    assert [r.name for r in results] == ["baseline", "baseline@ort"]
    assert results[0].ok and results[0].timing.latency is not None
    error = results[1].error
    assert error.startswith("ort failed: RuntimeError: ONNX export failed: ")
    assert "\n" not in error and "\x1b" not in error and "data-dependent" in error
