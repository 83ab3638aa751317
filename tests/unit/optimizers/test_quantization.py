import pytest
import torch
from torch import nn

from optim_support import (  # noqa: F401
    accuracy,
    assert_untouched,
    ctx,
    digits_split,
    make_context,
    saved_size,
    se_net,
    small,
    snapshot,
    trained_cnn,
)
from optimizers import Int8Settings, int8_weight_modules, quantization


def _quantized_weight_dtypes(model):
    return set(int8_weight_modules(model).values())


def test_static_int8_on_seed_cnn(ctx, trained_cnn, digits_split):
    snap = snapshot(trained_cnn)
    out = quantization.apply(trained_cnn, Int8Settings("static", calibration_batches=4), ctx)
    assert_untouched(trained_cnn, snap)
    assert out.config == {"int8": {"mode": "static", "path": "fx", "engine": "x86",
                                   "ran_on": "cpu", "calibration_batches": 4}}
    assert out.device == torch.device("cpu")
    assert _quantized_weight_dtypes(out.model) == {torch.qint8}
    assert set(int8_weight_modules(out.model)) == {"0", "2", "5"}
    assert saved_size(out.model) <= 0.3 * saved_size(trained_cnn)
    assert accuracy(out.model, digits_split[1]) >= accuracy(trained_cnn, digits_split[1]) - 0.01
    # FLOPs of the float graph per sample: 2 * MACs of the two convs and the classifier.
    macs = 64 * 9 * 36 + 128 * 64 * 9 * 16 + 2048 * 10
    assert out.flops_hint.dense == out.flops_hint.effective == 2 * macs


def test_dynamic_int8_quantizes_linear_only(ctx, trained_cnn):
    snap = snapshot(trained_cnn)
    out = quantization.apply(trained_cnn, Int8Settings("dynamic"), ctx)
    assert_untouched(trained_cnn, snap)
    assert out.config["int8"]["mode"] == "dynamic"
    assert int8_weight_modules(out.model) == {"5": torch.qint8}
    assert saved_size(out.model) < saved_size(trained_cnn)
    assert out.model(ctx.data.example_input).shape == (32, 10)


def test_dynamic_without_linear_is_one_line_error(ctx):
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    with pytest.raises(RuntimeError, match="Linear/LSTM/GRU") as err:
        quantization.apply(model, Int8Settings("dynamic"), ctx)
    assert "\n" not in str(err.value)


def test_qat_holds_int8_and_caches(ctx, trained_cnn):
    store, trained = {}, []

    def cached(key, build, train):
        model = build()
        if key in store:
            model.load_state_dict(store[key], strict=True)
            return model
        trained.append(key)
        train(model)
        store[key] = {k: v.clone() for k, v in model.state_dict().items()}
        return model

    ctx.hooks.cached = cached
    snap = snapshot(trained_cnn)
    a = quantization.apply(trained_cnn, Int8Settings("qat", qat_epochs=1), ctx)
    b = quantization.apply(trained_cnn, Int8Settings("qat", qat_epochs=1), ctx)
    assert_untouched(trained_cnn, snap)
    assert len(trained) == 1
    assert a.config["int8"]["path"] == "fx-qat" and a.config["int8"]["qat_epochs"] == 1
    assert _quantized_weight_dtypes(a.model) == {torch.qint8}
    with torch.inference_mode():
        assert torch.equal(a.model(ctx.data.example_input), b.model(ctx.data.example_input))


@pytest.mark.parametrize("mode", ["static", "dynamic", "qat"])
def test_user_model_with_se_and_depthwise(digits_split, mode):
    ctx = make_context(small(digits_split))
    model = se_net()
    snap = snapshot(model)
    out = quantization.apply(model, Int8Settings(mode, calibration_batches=2), ctx)
    assert_untouched(model, snap)
    assert torch.qint8 in _quantized_weight_dtypes(out.model)
    with torch.inference_mode():
        assert out.model(ctx.data.example_input).shape == (32, 10)


class ShapeBranch(nn.Module):
    """Python control flow on a shape: FX's symbolic trace cannot follow it; export can."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3)
        self.fc = nn.Linear(8 * 36, 10)

    def forward(self, x):
        x = torch.relu(self.conv(x))
        if x.shape[-1] > 4:
            x = x * 1.0
        return self.fc(x.flatten(1))


def test_static_reports_both_failures_in_one_line(ctx, monkeypatch):
    # Both flows failing must still read as one line naming each reason.
    def broken(*args, **kwargs):
        raise RuntimeError("pt2e unavailable\nsecond line")
    monkeypatch.setattr(quantization, "static_pt2e", broken)
    with pytest.raises(RuntimeError) as err:
        quantization.apply(ShapeBranch(), Int8Settings("static", calibration_batches=1), ctx)
    message = str(err.value)
    assert "\n" not in message and "FX" in message and "pt2e unavailable" in message


def test_cuda_context_records_cpu(ctx, trained_cnn):
    ctx.device = torch.device("cuda")  # only the label: dynamic INT8 never touches the device
    out = quantization.apply(trained_cnn, Int8Settings("dynamic"), ctx)
    assert out.device == torch.device("cpu") and out.config["int8"]["ran_on"] == "cpu"
    assert "CPU-only" in out.config["int8"]["note"]


def test_static_falls_back_to_pt2e_when_fx_cannot_trace(ctx):
    model = ShapeBranch()
    out = quantization.apply(model, Int8Settings("static", calibration_batches=1), ctx)
    cfg = out.config["int8"]
    assert cfg["path"] == "pt2e" and "TraceError" in cfg["fx_error"]
    assert torch.int8 in set(int8_weight_modules(out.model).values())
    with torch.inference_mode():
        assert out.model(ctx.data.example_input).shape == (32, 10)


@pytest.mark.slow
@pytest.mark.parametrize("mode, path", [("static", "pt2e"), ("qat", "pt2e-qat")])
def test_an_fx_graph_that_fails_when_run_falls_back_to_pt2e(mode, path):
    """ShuffleNet converts under FX but its quantized graph fails when run: both INT8 flows
    take pt2e, whose graph keeps the batch dimension dynamic (the test split is scored in
    batches of another size than the calibration's)."""
    from benchmarks.zoo.models import build_model
    from optimizers.base import Context, TrainData
    torch.manual_seed(0)
    model = build_model("torchvision:shufflenet_v2_x0_5", 10, 3, (32, 32))
    x = torch.randn(9, 3, 32, 32)
    context = Context.of(train=TrainData(x, torch.randint(0, 10, (9,)), 2), example_input=x[:2],
                      num_classes=10, in_channels=3)
    out = quantization.apply(model, Int8Settings(mode, 2, 1), context)
    assert out.config["int8"]["path"] == path
    assert "channels_last" in out.config["int8"]["fx_error"]
    assert int8_weight_modules(out.model)
    for batch in (1, 7, 256):
        assert out.model(torch.randn(batch, 3, 32, 32)).shape == (batch, 10)
