"""Counting parameters, multiply-adds and FLOPs: the one parameter counter, the one
convolution tap count and the one FLOP counter, used by the techniques (what pruning removed,
an INT8 model's float FLOPs) and by the engine's measurements alike (the peaks' convolution
kernel, the per-layer census of ``benchmarks.measure.macs``, the sensitivity map's layers).

A convolution's multiply-adds are those of the (output position, kernel tap) pairs whose input
position lies inside the input: a tap on the zero padding multiplies nothing the kernels
compute (oneDNN's skip it), so counting it would put a padded layer above the work it does
(ResNet-18 at 64x64 by 31%, the peaks' 3x3 kernel on 14x14 maps by 10%, which had a measured
peak stand above the theoretical one).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

DENSE_LAYERS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)


def state_tensors(state: dict):
    """Every tensor of a state dict, including those inside the tuples quantized layers pack."""
    for value in state.values():
        for t in tree_flatten(value)[0]:
            if isinstance(t, torch.Tensor):
                yield t
            elif hasattr(t, "__getstate__") and type(t).__name__.endswith("PackedParamsBase"):
                yield from (x for x in tree_flatten(t.__getstate__())[0]
                            if isinstance(x, torch.Tensor))


def count_params(model: nn.Module) -> tuple[int, int]:
    """(parameters, non-zero parameters). Quantized layers keep their weights packed outside
    ``parameters()``, so those are counted from the state dict's weight tensors."""
    params = list(model.parameters())
    if params:
        return (sum(p.numel() for p in params),
                sum(int(torch.count_nonzero(p.detach())) for p in params))
    total = nonzero = 0
    for key, value in model.state_dict().items():
        for t in _weight_tensors(key, value):
            data = t.int_repr() if t.is_quantized else t
            total += data.numel()
            nonzero += int(torch.count_nonzero(data))
    return total, nonzero


def _weight_tensors(key: str, value):
    if isinstance(value, torch.Tensor):
        if key.endswith(("weight", "bias")) and value.is_floating_point() or value.is_quantized:
            yield value
        return
    # Packed quantized parameters: (weight, bias) tuples or packed objects.
    for t in state_tensors({key: value}):
        if t.is_quantized or t.is_floating_point():
            yield t


def _per_dim(value, n: int) -> tuple[int, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (int(value),) * n


def tap_positions(size: int, out: int, kernel: int, stride: int = 1, padding: int = 0,
                  dilation: int = 1) -> list[int]:
    """Along one spatial dimension, for each kernel index k: how many of the ``out`` output
    positions o read an input position o * stride - padding + k * dilation inside [0, size)
    (``padding``: the zeros before the input). Counted per k from the two ends of that range,
    never by enumerating positions."""
    counts = []
    for k in range(kernel):
        shift = k * dilation - padding
        first = max(0, -(shift // stride))                 # ceil(-shift / stride)
        last = min(out - 1, (size - 1 - shift) // stride)
        counts.append(max(0, last - first + 1))
    return counts


def conv_macs(input_shape, weight_shape, stride=1, padding=0, dilation=1, out=None,
              per_tap: torch.Tensor | None = None) -> int:
    """Multiply-adds of one convolution call: for every (output position, kernel tap) pair
    whose input position lies inside the input, in_channels / groups per output channel
    (``weight_shape``: out_channels, in_channels / groups, *kernel).

    ``padding``: the zeros before the input along each dimension; ``out``: the output's
    spatial size, where the padding after it differs (else the symmetric one's). ``per_tap``
    (the kernel's shape): how many of the out_channels x in_channels / groups weights count
    at each tap, where not all of them do (the zero ones, for ``count_flops``' effective
    count)."""
    c_out, c_in, *kernel = weight_shape
    n = len(kernel)
    size = tuple(input_shape[-n:])
    stride, padding, dilation = (_per_dim(v, n) for v in (stride, padding, dilation))
    if out is None:
        out = tuple((i + 2 * p - d * (k - 1) - 1) // s + 1
                    for i, k, s, p, d in zip(size, kernel, stride, padding, dilation))
    batch = prod(input_shape[:-n - 1])  # () for an unbatched input
    taps = [tap_positions(*dims) for dims in zip(size, out, kernel, stride, padding, dilation)]
    if per_tap is None:
        return batch * c_out * c_in * prod(sum(t) for t in taps)
    grid = torch.ones((), dtype=torch.int64)  # output positions per tap: kernel-sized
    for t in taps:
        grid = grid.unsqueeze(-1) * torch.tensor(t, dtype=torch.int64)
    return batch * int((per_tap.to(torch.int64) * grid).sum())


def _conv_layer_geometry(module: nn.Module, size: tuple[int, ...]) -> tuple:
    """(input size, stride, padding before, dilation) of a convolution layer, float or
    quantized, as its kernel sees them."""
    n = len(size)
    kernel = _per_dim(module.kernel_size, n)
    stride, dilation = _per_dim(module.stride, n), _per_dim(module.dilation, n)
    padding = module.padding
    if padding == "valid":
        before = after = (0,) * n
    elif padding == "same":
        before = after = tuple(d * (k - 1) // 2 for k, d in zip(kernel, dilation))
        # An even kernel's odd zero goes after the input, into a copy of it the kernel is
        # given: it multiplies that zero as it would a value.
        size = tuple(i + d * (k - 1) - 2 * b for i, k, d, b in zip(size, kernel, dilation, before))
    else:
        before = after = _per_dim(padding, n)
    if getattr(module, "padding_mode", "zeros") != "zeros":
        # Reflect, replicate, circular: the layer pads with copies of the input before it
        # convolves, so every tap reads a value.
        size = tuple(i + b + a for i, b, a in zip(size, before, after))
        before = (0,) * n
    return size, stride, before, dilation


def layer_macs(module: nn.Module, x: torch.Tensor, output: torch.Tensor,
               per_tap: torch.Tensor | None = None) -> int:
    """Multiply-adds of one call of a convolution (any module with a ``kernel_size``) or
    linear layer, float or quantized, from the shapes it was called with; ``per_tap`` as
    ``conv_macs``' (a linear layer has one tap: the count of its weights that count)."""
    if not hasattr(module, "kernel_size"):
        if per_tap is None:
            return output.numel() * x.shape[-1]
        return output.numel() // max(output.shape[-1], 1) * int(per_tap)
    kernel = _per_dim(module.kernel_size, x.dim() - 2)
    n = len(kernel)
    size, stride, before, dilation = _conv_layer_geometry(module, tuple(x.shape[-n:]))
    weight = (module.out_channels, module.in_channels // (getattr(module, "groups", 1) or 1),
              *kernel)
    return conv_macs((*x.shape[:-n], *size), weight, stride, before, dilation,
                     out=tuple(output.shape[-n:]), per_tap=per_tap)


@dataclass(frozen=True)
class FlopCount:
    """FLOPs per sample of one forward pass.

    ``dense``: every multiply-add the kernels execute (torch.utils.flop_counter).
    ``effective``: the multiply-adds whose weight is non-zero. Dense kernels (PyTorch's CPU
    and CUDA convolutions and matmuls, INT8 included) skip none of the zeros that unstructured
    pruning leaves, so only ``dense`` predicts their speed; ``effective`` is what a sparse
    kernel could reach. Channel pruning removes weights outright: both counts fall.
    """
    dense: int
    effective: int


def _aten_conv_flops(x_shape, w_shape, _bias, stride, padding, dilation, transposed, *args,
                out_shape=None, **kwargs) -> int:
    """FlopCounterMode's formula for aten's convolution, counting the taps that touch the
    input (its own counts every tap, the padding's too)."""
    if transposed:  # its padding crops the output, it pads no input: counted as torch does
        from torch.utils.flop_counter import conv_flop_count
        return conv_flop_count(x_shape, w_shape, out_shape, transposed=True)
    return 2 * conv_macs(x_shape, w_shape, stride, padding, dilation,
                         out=tuple(out_shape[2:]))


def count_flops(model: nn.Module, example: torch.Tensor,
                device: torch.device | str | None = None) -> FlopCount | None:
    """FLOPs per sample, dense and effective; None when the counter sees no op it knows
    (quantized kernels are invisible to it: take the float model's count instead).

    FlopCounterMode, not the per-layer census (``benchmarks.measure.macs``), counts the dense
    FLOPs: it sees every matmul, those outside a convolution or linear layer (attention's)
    included; its convolutions are counted by ``conv_macs`` as the census's are."""
    from torch.utils.flop_counter import FlopCounterMode
    aten = torch.ops.aten
    x = example.to(device) if device is not None else example
    zero_macs: list[int] = []

    def hook(module, inputs, output):
        # Each zero weight skips its multiply-adds: one per output position its tap touches
        # the input at (a linear layer's one tap: every row of its output).
        weight = getattr(module, "weight", None)
        if not isinstance(weight, torch.Tensor) or not isinstance(output, torch.Tensor):
            return
        zero = weight.detach() == 0
        if zero.any():
            per_tap = zero.sum() if isinstance(module, nn.Linear) else zero.flatten(0, 1).sum(0)
            zero_macs.append(layer_macs(module, inputs[0], output, per_tap))

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, DENSE_LAYERS)]
    # aten's forward convolutions with its signature; the backends' own (cudnn_convolution,
    # _slow_conv2d_forward) run beneath aten.convolution, out of the mode's sight.
    counter = FlopCounterMode(display=False, custom_mapping={
        op: _aten_conv_flops for op in (aten.convolution, aten._convolution,
                                   aten.convolution_overrideable)})
    try:
        with torch.inference_mode(), counter:
            model(x)
    except Exception:
        return None
    finally:
        for h in handles:
            h.remove()
    total = counter.get_total_flops()
    if not total:
        return None
    batch = max(x.shape[0], 1)
    dense = int(total // batch)
    return FlopCount(dense=dense, effective=max(0, dense - 2 * sum(zero_macs) // batch))
