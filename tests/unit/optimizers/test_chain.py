import pytest
import torch

from optim_support import (  # noqa: F401
    assert_untouched,
    ctx,
    digits_split,
    make_context,
    se_net,
    small,
    snapshot,
    trained_cnn,
)
from optimizers import (
    AmpSettings,
    DistillSettings,
    Int8Settings,
    PruneSettings,
    apply_chain,
    apply_one,
    int8_weight_modules,
    scratch,
    sparsity_report,
)


def test_full_chain_on_seed_cnn(ctx, trained_cnn):
    snap = snapshot(trained_cnn)
    steps = [("prune", PruneSettings(0.5, "l1", 1)), ("distill", DistillSettings(epochs=1)),
             ("int8", Int8Settings("static", calibration_batches=2)), ("amp", AmpSettings())]
    out = apply_chain(trained_cnn, steps, ctx)
    assert_untouched(trained_cnn, snap)
    assert list(out.config) == ["prune", "distill", "int8", "amp"]
    assert out.config["distill"]["mode"] == "recover"
    assert out.config["distill"]["effective_sparsity_after"] == pytest.approx(0.5, abs=1e-3)
    assert out.config["int8"]["path"] == "fx"
    # INT8 kernels ignore autocast; the chain records that instead of pretending.
    assert "skipped" in out.config["amp"] and out.autocast_dtype is None
    assert out.device == torch.device("cpu")
    assert out.flops_hint and out.layer_sparsity
    assert int8_weight_modules(out.model)
    with torch.inference_mode():
        assert out.model(ctx.data.example_input).shape == (32, 10)


def test_channel_then_distill_then_amp(ctx, trained_cnn):
    steps = [("prune", PruneSettings(0.5, "channel", 0)), ("distill", DistillSettings(epochs=1)),
             ("amp", AmpSettings())]
    out = apply_chain(trained_cnn, steps, ctx)
    assert out.autocast_dtype == torch.bfloat16
    assert out.model[0].out_channels == 32
    assert out.config["distill"]["epochs"] == 1


@pytest.mark.parametrize("steps,match", [
    ([("int8", Int8Settings()), ("prune", PruneSettings())], "order"),
    ([("prune", PruneSettings()), ("prune", PruneSettings())], "once"),
    ([("prune", AmpSettings())], "PruneSettings"),
    ([("quantum", AmpSettings())], "technique"),
    ([], "at least one"),
])
def test_chain_validation(ctx, trained_cnn, steps, match):
    with pytest.raises(ValueError, match=match):
        apply_chain(trained_cnn, steps, ctx)


def test_apply_one_and_scratch(ctx, trained_cnn):
    out = apply_one(trained_cnn, "prune", PruneSettings(0.3, "global", 0), ctx)
    assert sparsity_report(out.model)["effective_sparsity"] == pytest.approx(0.3, abs=1e-3)
    control = scratch(DistillSettings(epochs=1), ctx)
    assert control.config["student-scratch"]["student"] == "seed_cnn_small"


def test_user_model_through_every_technique(digits_split):
    ctx = make_context(small(digits_split))
    model = se_net()
    snap = snapshot(model)
    singles = [("prune", PruneSettings(0.5, m, 0)) for m in ("l1", "global", "channel")] + [
        ("int8", Int8Settings(m, calibration_batches=2)) for m in ("static", "dynamic", "qat")] + [
        ("amp", AmpSettings())]
    for technique, settings in singles:
        out = apply_one(model, technique, settings, ctx)
        with torch.inference_mode(), out.autocast("cpu"):
            assert out.model.eval()(ctx.data.example_input).shape == (32, 10), settings
    chained = apply_chain(model, [("prune", PruneSettings(0.5, "channel", 0)),
                                  ("int8", Int8Settings("static", calibration_batches=2))], ctx)
    assert set(chained.config) == {"prune", "int8"}
    assert_untouched(model, snap)
