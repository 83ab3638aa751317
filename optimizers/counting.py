"""Counting parameters and FLOPs: the one parameter counter and the one FLOP counter, used by
the techniques (what pruning removed, an INT8 model's float FLOPs) and by the engine's
measurements alike.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def count_flops(model: nn.Module, example: torch.Tensor,
                device: torch.device | str | None = None) -> FlopCount | None:
    """FLOPs per sample, dense and effective; None when the counter sees no op it knows
    (quantized kernels are invisible to it: take the float model's count instead)."""
    from torch.utils.flop_counter import FlopCounterMode
    x = example.to(device) if device is not None else example
    zero_macs: list[int] = []

    def hook(module, _inputs, output):
        # Each zero weight skips one multiply-add per output position it is applied at:
        # per row of a Linear's output, per (sample, pixel) of a convolution's channel.
        weight = getattr(module, "weight", None)
        if not isinstance(weight, torch.Tensor) or not isinstance(output, torch.Tensor):
            return
        zeros = weight.numel() - int(torch.count_nonzero(weight.detach()))
        if zeros:
            width = output.shape[-1] if isinstance(module, nn.Linear) else output.shape[1]
            zero_macs.append(zeros * (output.numel() // max(width, 1)))

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, DENSE_LAYERS)]
    counter = FlopCounterMode(display=False)
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
