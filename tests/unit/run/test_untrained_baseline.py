"""A baseline trained here that learned nothing is said so: every variant would be compared
against an untrained model (a recommendation's certificate too)."""

from __future__ import annotations

import json

from helpers import FAST_CLI

BLIND = '''import torch
from torch import nn


class Blind(nn.Module):
    """Logits that never look at the input: it can learn the class prior and nothing more."""

    def __init__(self, num_classes):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(num_classes))

    def forward(self, x):
        return self.bias.expand(x.shape[0], -1)


def build(num_classes, in_channels):
    return Blind(num_classes)
'''


def test_a_baseline_that_learned_nothing_is_said_so(tmp_path, cli):
    model = tmp_path / "blind.py"
    model.write_text(BLIND)
    out = tmp_path / "r.json"
    p = cli("run", "--model", f"{model}:build", "--prune", "0.3", "--no-cache", "--store",
            str(tmp_path / "s.db"), "--json", str(out), *FAST_CLI)
    assert p.returncode == 1, p.stderr  # the pruned variant fails: a bias has no weights
    doc = json.loads(out.read_text())
    base = doc["variants"][0]
    assert base["accuracy"] <= 0.15
    warning = next(w for w in doc["warnings"] if "trained here" in w)
    assert "near chance (10.0%)" in warning and "untrained model" in warning
    assert "give more --epochs" in warning and f"warning: {warning}" in p.stdout + p.stderr


def test_a_baseline_that_learned_is_not_flagged(tmp_path, cli):
    out = tmp_path / "r.json"
    p = cli("run", "--prune", "0.3", "--no-cache", "--store", str(tmp_path / "s.db"),
            "--json", str(out), *FAST_CLI)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["variants"][0]["accuracy"] > 0.5
    assert not any("trained here" in w for w in doc["warnings"])
