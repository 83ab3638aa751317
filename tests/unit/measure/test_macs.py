"""One multiply-add census: every counter (the roofline's per-layer census, the sensitivity
map's per-module one, the variants' FLOP counter and the peaks' convolution kernel) counts a
convolution's taps that touch the input, never those on its zero padding, and each equals a
count made by hand, tap by tap."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from benchmarks.measure import kernels
from benchmarks.measure.macs import mac_census
from benchmarks.sensitivity.profile import module_macs
from optimizers.counting import FlopCount, count_flops


def hand_macs(conv: nn.Conv2d, x_shape) -> int:
    """The multiply-adds of ``conv`` on an input of ``x_shape``, one (output position, kernel
    tap) pair at a time: those whose input position lies inside the input, each times the
    non-zero weights at that tap (out_channels x in_channels / groups where none is zero)."""
    batch, _, height, width = x_shape
    out_h, out_w = conv(torch.zeros(x_shape)).shape[2:]
    (kh, kw), (sh, sw), (dh, dw) = conv.kernel_size, conv.stride, conv.dilation
    ph, pw = conv.padding
    nonzero = (conv.weight.detach() != 0).flatten(0, 1).sum(0)  # weights at each tap
    macs = 0
    for oy in range(out_h):
        for ox in range(out_w):
            for ky in range(kh):
                for kx in range(kw):
                    iy, ix = oy * sh - ph + ky * dh, ox * sw - pw + kx * dw
                    if 0 <= iy < height and 0 <= ix < width:
                        macs += int(nonzero[ky, kx])
    return batch * macs


CASES = {
    "3x3, padded by one, on 5x5": (nn.Conv2d(3, 8, 3, stride=1, padding=1), (1, 3, 5, 5)),
    "stride 2, dilation 2, groups 2": (
        nn.Conv2d(4, 8, 3, stride=2, padding=2, dilation=2, groups=2), (2, 4, 9, 7)),
    "3x5, per-side strides, depthwise": (
        nn.Conv2d(4, 4, (3, 5), stride=(2, 1), padding=(1, 3), dilation=(1, 2), groups=4),
        (1, 4, 6, 9)),
}


@pytest.mark.parametrize("case", CASES)
def test_every_counter_counts_a_padded_convolutions_taps_that_touch_the_input(case):
    torch.manual_seed(0)
    conv, shape = CASES[case]
    conv.eval()
    x = torch.randn(shape)
    by_hand = hand_macs(conv, shape)
    assert by_hand < conv(x).numel() * conv.weight[0].numel()  # the padding's taps are out
    assert mac_census(conv, x)["macs"] == {"fp32": by_hand}
    assert module_macs(nn.Sequential(conv), x) == {"0": by_hand // shape[0]}
    per_sample = by_hand // shape[0]
    assert count_flops(conv, x) == FlopCount(dense=2 * per_sample, effective=2 * per_sample)


def test_a_pruned_convolutions_effective_flops_skip_its_zero_weights_where_they_touch_input():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3, padding=1, bias=False)
    with torch.no_grad():
        conv.weight[:2, :, 0, 0] = 0    # a corner tap: on the padding along two sides
        conv.weight[3, 1] = 0           # one kernel whole
    x = torch.randn(2, 3, 7, 6)
    flops = count_flops(conv, x)  # per sample: the batch of two halves each count
    unpruned = nn.Conv2d(3, 4, 3, padding=1, bias=False)
    assert flops.dense == 2 * hand_macs(unpruned, x.shape) // 2
    assert flops.effective == 2 * hand_macs(conv, x.shape) // 2 < flops.dense


def test_an_even_kernels_same_padding_counts_the_zero_torch_copies_into_the_input():
    """torch pads an even kernel's odd zero into a copy of the input (after it) and hands the
    kernel that copy and a padding of one: the kernel multiplies that zero, the counters
    count it, as a hand count of the convolution torch runs does."""
    torch.manual_seed(0)
    same = nn.Conv2d(2, 3, 4, padding="same")
    runs = nn.Conv2d(2, 3, 4, padding=1)
    runs.load_state_dict(same.state_dict())
    x = torch.randn(1, 2, 6, 5)
    by_hand = hand_macs(runs, (1, 2, 7, 6))
    assert mac_census(same, x)["macs"] == {"fp32": by_hand}
    assert count_flops(same, x).dense == 2 * by_hand


def test_a_reflect_padded_convolution_counts_every_tap():
    """Reflect padding copies the input: every tap reads a value and is counted."""
    conv = nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect")
    x = torch.randn(1, 2, 5, 5)
    assert mac_census(conv, x)["macs"]["fp32"] == 3 * 2 * 9 * 5 * 5


def test_the_peaks_convolution_kernels_count_twice_the_taps_that_touch_the_input():
    n = 64
    channels = kernels._conv_channels(n)
    conv = nn.Conv2d(channels, channels, kernels.CONV_KERNEL, padding=kernels.CONV_PADDING,
                     bias=False)
    by_hand = hand_macs(conv, (kernels.CONV_BATCH, channels, kernels.CONV_MAP,
                               kernels.CONV_MAP))
    for name in ("conv_fp32", "autocast_conv_bf16", "quantized_conv"):
        assert kernels.KERNELS[name].flops(n) == 2 * by_hand, name
    # The timed call is that convolution: the same shapes in, the same map out.
    out = kernels.KERNELS["conv_fp32"].make(torch.device("cpu"), n)()
    assert out.shape == (kernels.CONV_BATCH, channels, kernels.CONV_MAP, kernels.CONV_MAP)


def test_resnet18_at_64x64_no_longer_counts_the_taps_on_its_padding():
    """The zoo's ResNet-18 at 64x64: every padded convolution counted tap by tap (the taps on
    the padding were 31% of the count), the classifier beside them, by every counter."""
    from benchmarks.zoo.models import create_model
    torch.manual_seed(0)
    model = create_model("resnet18", 10, 3, (64, 64)).eval()
    x = torch.randn(1, 3, 64, 64)
    shapes = []  # (layer, the input it was called with)
    handles = [m.register_forward_hook(lambda layer, i, o: shapes.append((layer, i[0].shape)))
               for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.inference_mode():
        model(x)
    for h in handles:
        h.remove()
    by_hand = sum(hand_macs(m, shape) if isinstance(m, nn.Conv2d) else
                  m.in_features * m.out_features for m, shape in shapes)
    every_tap = sum(m(torch.zeros(shape)).numel() * m.weight[0].numel() for m, shape in shapes)
    assert every_tap / by_hand == pytest.approx(1.31, abs=0.005)
    assert mac_census(model, x)["macs"] == {"fp32": by_hand}
    assert sum(module_macs(model, x).values()) == by_hand
    assert count_flops(model, x).dense == 2 * by_hand
