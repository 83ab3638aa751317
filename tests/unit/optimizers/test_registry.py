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
    before = [s.technique for s in ctx.prior]
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
    from benchmarks.cli.main import build_parser, list_info, main, technique_choices
    parser = build_parser()
    args = parser.parse_args(["run", "--toy", "1.5,3", "--toy-bias", "0.5"])
    assert technique_choices(args) == ({("toy", "scale"): (1.5, 3.0),
                                        ("toy", "bias"): (0.5,)}, {"toy"})
    run_help = parser._subparsers._group_actions[0].choices["run"].format_help()
    assert "--toy" in run_help and "factor the logits are multiplied by" in run_help
    info = list_info()
    assert info["order"] == ["prune", "distill", "toy", "int8", "amp"]
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
    assert scaled.correct_bits == base.correct_bits


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
