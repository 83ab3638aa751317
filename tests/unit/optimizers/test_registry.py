"""The technique registry is the one home of the techniques' vocabulary: a toy technique
registered here, in the test process, with no other file edited, shows up in the CLI's parser
and help, in `list`, in a spec's round trip and its sweep axes, in a chain, in the runner and
in the dashboard's widgets."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from optim_support import digits_split, trained_cnn  # noqa: F401 (fixtures)
from optimizers import registry
from optimizers.base import Outcome
from optimizers.settings import check_settings, setting


@dataclass(frozen=True)
class ToySettings:
    scale: float = setting(2.0, "factor the logits are multiplied by", low=0.5, high=4.0,
                           sweep=True, flag="--toy", label="x{}", step=0.5)
    bias: float = setting(0.0, "added to the logits", low=-1.0, high=1.0, step=0.5)

    def __post_init__(self):
        check_settings(self, "toy")


class Scaled(nn.Module):
    def __init__(self, inner: nn.Module, scale: float, bias: float):
        super().__init__()
        self.inner, self.scale, self.bias = inner, scale, bias

    def forward(self, x):
        return self.inner(x) * self.scale + self.bias


def toy_apply(model: nn.Module, settings: ToySettings, ctx) -> Outcome:
    before = [s.technique for s in ctx.lineage.prior]
    return Outcome(model=Scaled(copy.deepcopy(model), settings.scale, settings.bias),
                   config={"toy": {"scale": settings.scale, "bias": settings.bias,
                                   "after": before}})


@pytest.fixture
def toy():
    technique = registry.register(registry.Technique(
        "toy", ToySettings, 25, toy_apply, "a toy technique that scales the logits",
        switch="scale", label_fields=("scale",)))
    try:
        yield technique
    finally:
        registry.unregister("toy")


def test_a_registered_technique_reaches_the_cli_parser_and_list(toy, capsys):
    from benchmarks.cli.listing import list_info
    from benchmarks.cli.main import main
    from benchmarks.cli.parser import build_parser
    from benchmarks.cli.run import technique_choices
    parser = build_parser()
    args = parser.parse_args(["run", "--toy", "1.5,3", "--toy-bias", "0.5"])
    assert technique_choices(args) == ({("toy", "scale"): (1.5, 3.0),
                                        ("toy", "bias"): (0.5,)}, {"toy"})
    run_help = parser._subparsers._group_actions[0].choices["run"].format_help()
    assert "--toy" in run_help and "factor the logits are multiplied by" in run_help
    info = list_info()
    assert info["order"] == ["prune", "distill", "toy", "int8", "int4", "amp"]
    assert info["techniques"]["toy"]["settings"]["scale"]["sweep"] is True
    assert main(["list"]) == 0
    assert "--toy-bias" in capsys.readouterr().out
    # Its bounds are checked where every other setting's are: one line, exit 2.
    assert main(["run", "--toy", "9", "--quiet"]) == 2
    assert "toy.scale must be >= 0.5 and <= 4.0, got 9.0" in capsys.readouterr().err


def test_a_registered_technique_round_trips_through_a_spec_and_sweeps(toy):
    from benchmarks.spec.sweep import SweepSpec
    spec = SweepSpec.from_toggles(toy=(1.0, 2.0), prune=0.5, combine=True)
    names = [v.name for v in spec.variants]
    assert names == ["baseline", "prune-l1-0.5", "toy-x1", "toy-x2",
                     "prune-l1-0.5+toy-x1", "prune-l1-0.5+toy-x2"]
    assert spec.variants[2].axes_dict() == {"toy.scale": 1.0}
    assert spec.variants[-1].techniques == ("prune", "toy")
    again = SweepSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec and isinstance(again.variants[2].toy, ToySettings)


def test_a_registered_technique_runs_in_a_chain_and_in_the_runner(toy, tmp_path):
    from benchmarks.run.cache import WeightsCache
    from benchmarks.run.runner import run_sweep
    from benchmarks.spec.sweep import SweepSpec
    from optim_support import make_context, seed_cnn
    from optimizers import PruneSettings, apply_chain
    x, y = torch.randn(64, 1, 8, 8), torch.randint(0, 10, (64,))
    ctx = make_context((x, y))
    model = seed_cnn().eval()
    out = apply_chain(model, [("prune", PruneSettings(0.5, "l1", 0)),
                              ("toy", ToySettings(3.0))], ctx)
    assert out.config["toy"] == {"scale": 3.0, "bias": 0.0, "after": ["prune"]}
    with torch.inference_mode():
        assert torch.allclose(out.model(x[:2]), out.model.inner(x[:2]) * 3.0)
    with pytest.raises(ValueError, match="order"):
        apply_chain(model, [("toy", ToySettings()), ("prune", PruneSettings())], ctx)

    spec = SweepSpec.from_toggles(toy=2.0, epochs=1, min_time_s=0.05)
    base, scaled = run_sweep(spec, cache=WeightsCache(tmp_path))
    assert scaled.ok and scaled.name == "toy-x2" and scaled.config["toy"]["scale"] == 2.0
    # Scaling the logits changes no prediction: the same examples are right.
    assert scaled.scores.correct_bits == base.scores.correct_bits


def test_a_registered_technique_gets_dashboard_widgets_from_its_metadata(toy, tmp_path,
                                                                        monkeypatch):
    from streamlit.testing.v1 import AppTest

    from helpers import ROOT
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(tmp_path / "r.db"))
    at = AppTest.from_file(str(ROOT / "pages" / "experiment.py"), default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.toggle(key="exp_toy").value is True
    slider = at.slider(key="exp_toy_scale")
    assert (slider.min, slider.max, slider.value) == (0.5, 4.0, 2.0)  # the setting's bounds
    at.checkbox(key="exp_toy_sweep").check().run()
    assert at.slider(key="exp_toy_scale_range").value == (0.5, 2.0)  # a range, and points
    assert at.number_input(key="exp_toy_scale_count").value == 5
    from benchmarks.service.queue import JobQueue
    JobQueue(tmp_path / "r.db").stop_worker("cpu")


# -- a technique that changes the precision its result runs in -------------------------------

@dataclass(frozen=True)
class HalfSettings:
    dtype: str = setting("bf16", "the autocast dtype it runs under", choices=("bf16",),
                         flag="--toy-half")

    def __post_init__(self):
        check_settings(self, "toyhalf")


def half_apply(model: nn.Module, settings: HalfSettings, ctx) -> Outcome:
    return Outcome(model=copy.deepcopy(model), autocast_dtype=torch.bfloat16,
                   config={"toyhalf": {"dtype": settings.dtype}})


@pytest.fixture
def toy_half():
    technique = registry.register(registry.Technique(
        "toyhalf", HalfSettings, 45, half_apply, "a toy that runs the model under bf16",
        switch="dtype", label_fields=("dtype",), trains=lambda s: False,
        precision=lambda config: config.get("dtype"), export="runtime",
        not_exported={"onnx": "toyhalf's autocast is a run-time setting ONNX does not carry"}))
    try:
        yield technique
    finally:
        registry.unregister("toyhalf")


def test_a_registered_precision_changing_technique_is_held_to_its_own_roof_and_exported(
        toy_half, tmp_path):
    """Declared once in its registry entry: the roofline holds its variant to the bf16 roof,
    and the export writes what can carry it and says, in one line, why ONNX cannot."""
    from benchmarks.export.variant import export_variant
    from benchmarks.measure.roofline import variant_precision
    from benchmarks.report.document import RunReport
    from benchmarks.run.cache import WeightsCache
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.spec.sweep import SweepSpec
    from benchmarks.store.database import ResultsStore
    assert variant_precision({"toyhalf": {"dtype": "bf16"}}, {}, "cpu") == "bf16"
    # Declared after INT8 in the chain: its precision is the last one applied.
    assert variant_precision({"int8": {"path": "fx"}, "toyhalf": {"dtype": "bf16"}}, {},
                             "cpu") == "bf16"
    spec = SweepSpec.from_toggles(toy_half="bf16", epochs=1, min_time_s=0.05)
    store = ResultsStore(tmp_path / "r.db")
    cache = WeightsCache(tmp_path / "cache")
    sweep = prepare_sweep(spec, cache=cache)
    sweep.attach_peaks(store)
    with store.record(model=spec.model, dataset=spec.dataset, device="cpu",
                      spec=spec.to_dict(), environment=sweep.environment) as run:
        for index, result in enumerate(sweep.run()):
            run.add(result, index)
    report = RunReport.from_stored(store.run(run.run_id))
    half = next(r for r in report.rows() if r["variant"] == "toyhalf-bf16")
    assert half["precision"] == "bf16"
    assert half["peak_flops_per_s"] == \
        sweep.environment["peaks"]["cpu"]["gemm_flops_per_s"]["bf16"]
    card = export_variant(store, run.run_id, "toyhalf-bf16", tmp_path / "out", cache=cache)
    assert card["formats"]["safetensors"]["status"] == "written"
    onnx = card["formats"]["onnx"]
    assert onnx["status"] == "not exported" and "toyhalf's autocast" in onnx["reason"]
    assert "\n" not in onnx["reason"]


# -- a precision of its own: registered here, reaching the roofline, the census and export ---

@dataclass(frozen=True)
class DoubleSettings:
    dtype: str = setting("fp64", "the precision it runs the model in", choices=("fp64",),
                         flag="--toy-double")

    def __post_init__(self):
        check_settings(self, "toydouble")


class Doubled(nn.Module):
    """The model's layers in float64: its convolutions and linears multiply in fp64."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x.double()).float()


def double_apply(model: nn.Module, settings: DoubleSettings, ctx) -> Outcome:
    return Outcome(model=Doubled(copy.deepcopy(model).double()),
                   config={"toydouble": {"dtype": settings.dtype}})


@pytest.fixture
def toy_double(monkeypatch):
    """fp64, a precision of the test's own: 8 bytes an element, its roof a float64
    ``torch.mm`` on the CPU, float64 outputs counting as running in it; and a technique that
    runs the model in it."""
    from benchmarks.measure import kernels, precisions
    monkeypatch.setitem(kernels.KERNELS, "mm_fp64",
                        kernels.Kernel("torch.mm", kernels._gemm_flops,
                                       kernels._mm(torch.float64)))
    precision = precisions.register(precisions.Precision(
        "fp64", 8, (("cpu", ("mm_fp64",)),), "IEEE double precision (a test's own)",
        dtypes=("float64",)))
    technique = registry.register(registry.Technique(
        "toydouble", DoubleSettings, 46, double_apply, "a toy that runs the model in fp64",
        switch="dtype", label_fields=("dtype",), trains=lambda s: False,
        precision=lambda config: config.get("dtype")))
    try:
        yield precision, technique
    finally:
        registry.unregister("toydouble")
        precisions.unregister("fp64")


def test_a_registered_precision_reaches_the_roofline_the_census_and_export(toy_double,
                                                                          tmp_path):
    """Registered once, in this test: the peaks measure its roof, the per-layer census
    counts the multiply-adds in it, the roofline holds the variant to its roof, and the
    exported model card names it."""
    from benchmarks.export.variant import export_variant
    from benchmarks.measure import precisions
    from benchmarks.measure.macs import mac_census
    from benchmarks.report.document import RunReport
    from benchmarks.run.cache import WeightsCache
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.spec.sweep import SweepSpec
    from benchmarks.store.database import ResultsStore
    from optim_support import seed_cnn
    from benchmarks.cli.listing import list_info
    assert list_info()["precisions"]["fp64"]["bytes_per_element"] == 8  # `list` names it
    census = mac_census(Doubled(seed_cnn().double().eval()), torch.randn(2, 1, 8, 8))
    assert census["precision"] == "fp64" and census["share"] == 1.0
    assert "fp64" in precisions.on_device("cpu")
    spec = SweepSpec.from_toggles(toy_double="fp64", epochs=1, min_time_s=0.05)
    store = ResultsStore(tmp_path / "r.db")
    cache = WeightsCache(tmp_path / "cache")
    sweep = prepare_sweep(spec, cache=cache)
    sweep.attach_peaks(store)
    cpu_peaks = sweep.environment["peaks"]["cpu"]
    assert cpu_peaks["gemm_flops_per_s"]["fp64"] > 0  # its roof, measured by its kernel
    assert cpu_peaks["method"]["kernels"]["fp64"] == "torch.mm"
    with store.record(model=spec.model, dataset=spec.dataset, device="cpu",
                      spec=spec.to_dict(), environment=sweep.environment) as run:
        for index, result in enumerate(sweep.run()):
            run.add(result, index)
    report = RunReport.from_stored(store.run(run.run_id))
    doubled = next(v for v in report.variants if v.name == "toydouble-fp64")
    assert doubled.cost.mac_census["precision"] == "fp64"  # counted, not only declared
    row = next(r for r in report.rows() if r["variant"] == "toydouble-fp64")
    assert row["precision"] == "fp64" and not row.get("roofline_warning")
    assert row["peak_flops_per_s"] == cpu_peaks["gemm_flops_per_s"]["fp64"]
    assert row["percent_of_peak"] is not None
    card = export_variant(store, run.run_id, "toydouble-fp64", tmp_path / "out", cache=cache)
    assert card["precision"]["name"] == "fp64" and card["precision"]["bytes_per_element"] == 8
    assert card["metrics"]["roofline"]["precision"] == "fp64"
    # The exported program carries its float64 graph; ONNX Runtime has no float64 Conv and
    # the wrapper is no fresh build of the model: each says so in one line.
    assert card["formats"]["pt2"]["status"] == "written", card["formats"]
    for entry in card["formats"].values():
        assert entry["status"] == "written" or "\n" not in entry["reason"]
    written = json.loads((tmp_path / "out" / "model_card.json").read_text())
    assert written["precision"]["name"] == "fp64"


# -- every registered technique, held to the same promises -----------------------------------

IMAGE_TECHNIQUES = [t.name for t in registry.techniques("image")]
TINY = dict(epochs=1, min_time_s=0.05, min_runs=4, warmup=1, finetune_epochs=1,
            calibration_batches=2, qat_epochs=1, distill_epochs=1)


def _one_of_each() -> dict:
    """Toggles switching every registered image technique on at its defaults (a language
    model's are tests/unit/run/test_lm_runner.py's)."""
    toggles = {}
    for t in registry.techniques("image"):
        if t.switch is None:
            toggles[t.name] = True
        else:
            default = t.make({}).__dict__[t.switch]
            toggles[t.flag(t.switch).lstrip("-").replace("-", "_")] = \
                True if default is None else default
    return toggles


@pytest.fixture(scope="module")
def every_technique(tmp_path_factory):
    """One sweep with every registered technique on its own, stored, and its weights cached."""
    from benchmarks.run.cache import WeightsCache
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.spec.sweep import SweepSpec
    from benchmarks.store.database import ResultsStore
    folder = tmp_path_factory.mktemp("every-technique")
    spec = SweepSpec.from_toggles(**_one_of_each(), **TINY)
    store, cache = ResultsStore(folder / "r.db"), WeightsCache(folder / "cache")
    sweep = prepare_sweep(spec, cache=cache)
    sweep.attach_peaks(store)
    with store.record(model=spec.model, dataset=spec.dataset, device="cpu",
                      spec=spec.to_dict(), environment=sweep.environment) as run:
        for index, result in enumerate(sweep.run()):
            run.add(result, index)
    return store, cache, run.run_id, spec, folder


def _variant_of(spec, name: str):
    return next(v for v in spec.variants if v.techniques == (name,))


@pytest.mark.parametrize("name", IMAGE_TECHNIQUES)
def test_every_technique_leaves_its_input_untouched(name, digits_split, trained_cnn):
    from optim_support import assert_untouched, make_context, snapshot
    from optimizers.chain import apply_chain
    technique = registry.get(name)
    fields = {f for f, _, _ in technique.fields()}
    settings = technique.make({k: v for k, v in TINY.items() if k in fields})
    x, y = digits_split[0]
    ctx = make_context((x[:256], y[:256]), teacher=trained_cnn)
    snap = snapshot(trained_cnn)
    outcome = apply_chain(trained_cnn, [(name, settings)], ctx)
    assert outcome.model is not trained_cnn
    assert_untouched(trained_cnn, snap)


@pytest.mark.parametrize("name", IMAGE_TECHNIQUES)
def test_every_technique_round_trips_through_json(name):
    from benchmarks.spec.variant import VariantSpec
    technique = registry.get(name)
    variant = VariantSpec(name, (name,), {name: technique.make({})})
    again = VariantSpec.from_dict(json.loads(json.dumps(variant.to_dict())))
    assert again == variant and again.stable_hash() == variant.stable_hash()


@pytest.mark.slow
@pytest.mark.parametrize("name", IMAGE_TECHNIQUES)
def test_every_technique_is_placed_on_the_roofline_at_its_declared_precision(
        name, every_technique):
    from benchmarks.report.document import RunReport
    store, _, run_id, spec, _ = every_technique
    report = RunReport.from_stored(store.run(run_id))
    row = next(r for r in report.rows() if r["variant"] == _variant_of(spec, name).name)
    result = next(v for v in report.variants if v.name == row["variant"])
    assert result.ok, result.error
    declared = registry.get(name).precision(result.config.get(name) or {}) or "fp32"
    assert row["precision"] == declared
    assert row["percent_of_peak"] is not None


@pytest.mark.slow
@pytest.mark.parametrize("name", IMAGE_TECHNIQUES)
def test_every_technique_exports_or_says_why_in_one_line(name, every_technique):
    from benchmarks.export.variant import export_variant
    store, cache, run_id, spec, folder = every_technique
    variant = _variant_of(spec, name).name
    card = export_variant(store, run_id, variant, folder / f"export-{name}", cache=cache)
    assert any(f["status"] == "written" for f in card["formats"].values()), card["formats"]
    for fmt, entry in card["formats"].items():
        if entry["status"] != "written":
            assert entry["reason"] and "\n" not in entry["reason"], (fmt, entry)
    for fmt, why in registry.get(name).not_exported.items():
        assert card["formats"][fmt]["status"] == "not exported"
        assert why in card["formats"][fmt]["reason"]
