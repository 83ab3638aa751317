import pytest
import torch

from optim_support import (  # noqa: F401
    accuracy,
    assert_untouched,
    ctx,
    digits_split,
    se_net,
    snapshot,
    trained_cnn,
)
from optimizers import AmpSettings, amp
from optimizers.precision import autocast as autocast_context


def test_amp_cpu_defaults_to_bf16_and_keeps_fp32_weights(ctx, trained_cnn, digits_split):
    snap = snapshot(trained_cnn)
    out = amp.apply(trained_cnn, AmpSettings(), ctx)
    assert_untouched(trained_cnn, snap)
    assert out.autocast_dtype == torch.bfloat16
    assert out.config == {"amp": {"dtype": "bf16", "device_type": "cpu", "weights": "fp32",
                                  "memory_format": "contiguous", "requested": None}}
    assert all(p.dtype == torch.float32 for p in out.model.parameters())
    with torch.inference_mode(), out.autocast("cpu"):
        assert out.model(ctx.data.example_input).dtype == torch.bfloat16
    with torch.inference_mode():
        assert out.model(ctx.data.example_input).dtype == torch.float32
    base = accuracy(trained_cnn, digits_split[1])
    assert accuracy(out.model, digits_split[1], out.autocast_dtype) >= base - 0.01


def test_autocast_context():
    with autocast_context("cpu", "bf16"):
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    with autocast_context("cpu", None):
        assert not torch.is_autocast_enabled("cpu")


def test_amp_user_model(digits_split):
    from optim_support import make_context, small
    model = se_net()
    out = amp.apply(model, AmpSettings("bf16"), make_context(small(digits_split)))
    with torch.inference_mode(), out.autocast("cpu"):
        assert out.model.eval()(torch.randn(2, 1, 8, 8)).dtype == torch.bfloat16


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_amp_cuda_defaults_to_fp16(ctx, trained_cnn):
    ctx.device = torch.device("cuda")
    out = amp.apply(trained_cnn, AmpSettings(), ctx)
    assert out.autocast_dtype == torch.float16
    model = out.model.cuda()
    with torch.inference_mode(), out.autocast("cuda"):
        assert model(ctx.data.example_input.cuda()).dtype == torch.float16
