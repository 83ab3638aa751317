"""A slice of `make coverage` (tools/coverage.py): every technique on a windowed-attention
transformer and on a CNN without a Linear layer, each model in its own process, rendered as
the matrix docs/MODEL_COVERAGE.md holds."""

from __future__ import annotations

import pytest

from helpers import scaled
from tools.coverage import CELLS, render, run_isolated, versions

pytestmark = pytest.mark.slow


def test_a_slice_of_the_coverage_matrix():
    swin, squeeze = (run_isolated(spec, list(CELLS), timeout=scaled(900))
                     for spec in ("torchvision:swin_t", "torchvision:squeezenet1_1"))
    assert swin["size"] == 32 and swin["family"] == "swin_transformer"
    assert {c: swin["cells"][c]["ok"] for c in CELLS} == dict.fromkeys(CELLS, True), swin
    prune = swin["cells"]["channel"]["detail"]["config"]["prune"]
    assert prune["scope"] == "blocks" and "windowed attention" in prune["why"]
    assert swin["cells"]["channel"]["detail"]["params"] < 0.8 * swin["params"]
    assert swin["cells"]["int8 dynamic"]["detail"]["config"]["int8"]["float_layers"] > 0

    failed = {c: squeeze["cells"][c].get("reason") for c in CELLS if not squeeze["cells"][c]["ok"]}
    assert list(failed) == ["int8 dynamic"]
    assert "Linear/LSTM/GRU" in failed["int8 dynamic"]  # SqueezeNet classifies with a conv

    text = render([swin, squeeze], versions(), 60.0)
    assert "## torchvision (2 architectures, 17 of 18 cells succeed, 94.4%)" in text
    assert "| `torchvision:squeezenet1_1` | squeezenet | 32 |" in text
    assert "1. RuntimeError: dynamic INT8 applies to Linear/LSTM/GRU layers" in text
