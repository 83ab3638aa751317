"""A user's own model (depthwise convs, a squeeze-excitation gate, SiLU) goes through every
technique from the command line."""

import json

import pytest

from helpers import FAST_CLI

ALL = ["--prune", "0.5", "--distill", "--student", "seed_cnn_narrow", "--amp", "--combine",
       *FAST_CLI, "--epochs", "2"]


@pytest.mark.parametrize("method, int8", [("l1", "static"), ("channel", "qat"),
                                          ("global", "dynamic")])
@pytest.mark.slow
def test_user_model_through_every_technique(tmp_path, cli, method, int8):
    out = tmp_path / "r.json"
    p = cli("run", "--model", "models/se_net.py:build", "--prune-method", method,
            "--int8", int8, *ALL, "--store", str(tmp_path / "s.db"), "--json", str(out))
    report = json.loads(out.read_text())
    errors = {v["name"]: v["error"] for v in report["variants"] if v["error"]}
    assert p.returncode == 0 and not errors, (errors, p.stderr[-2000:])
    names = [v["name"] for v in report["variants"]]
    assert names[0] == "baseline" and "student-scratch" in names and len(names) == 7
    combined = report["variants"][-1]
    assert combined["techniques"] == ["prune", "distill", "int8", "amp"]
    assert combined["config"]["int8"]["ran_on"] == "cpu"
