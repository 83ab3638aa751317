"""One small training loop shared by the baseline, fine-tuning, students and QAT.

Mixed precision follows current PyTorch: ``torch.amp.autocast`` for the forward pass and
``torch.amp.GradScaler`` only for fp16 (bf16 has fp32's exponent range and needs no loss
scaling). Weights stay in fp32 throughout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn

from optimizers.base import Batch, iterate
from optimizers.precision import AMP_TORCH_DTYPES, autocast  # noqa: F401  (re-exported)

# Fine-tuning an already trained model (after pruning, for QAT, KD recovery) uses a tenth of
# the training learning rate: at the full rate a fresh Adam knocked the pruned seed_cnn from
# 97.5% to 96.1% on digits in one epoch; at a tenth it recovered to 97.2-97.8%.
FINETUNE_LR_SCALE = 0.1

# (model, inputs, labels, *rest of the batch such as sample indices) -> loss. The default is
# plain cross-entropy.
LossFn = Callable[..., torch.Tensor]


def cross_entropy_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *_) -> torch.Tensor:
    return F.cross_entropy(model(x), y)


def fit(model: nn.Module, batches: Callable[[], Iterable[Batch]], epochs: int, *,
        device: torch.device | str = "cpu", lr: float = 1e-3, loss_fn: LossFn | None = None,
        amp: str | None = None, seed: int | None = None,
        on_progress: Callable[[float], None] | None = None,
        should_stop: Callable[[], bool] | None = None) -> nn.Module:
    """Train ``model`` in place with Adam for ``epochs`` passes over ``batches()``.

    ``amp`` is None, "fp16" or "bf16". Returns the model, left in eval mode.
    """
    device = torch.device(device)
    if seed is not None:
        torch.manual_seed(seed)
    loss_fn = loss_fn or cross_entropy_loss
    model.to(device).train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=lr)
    # GradScaler only matters for fp16; disabled it is a transparent pass-through.
    scaler = torch.amp.GradScaler(device.type, enabled=(amp == "fp16"))
    for epoch in range(epochs):
        data = batches()
        if not hasattr(data, "__len__"):  # a plain iterator: listed, to count its steps
            data = list(data)
        for step, batch in enumerate(iterate(data, device)):
            if should_stop is not None and should_stop():
                model.eval()
                return model
            optimizer.zero_grad(set_to_none=True)
            with autocast(device.type, amp):
                loss = loss_fn(model, *batch)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            if on_progress is not None:
                on_progress((epoch + (step + 1) / max(len(data), 1)) / epochs)
    model.eval()
    return model


@torch.inference_mode()
def outcomes(model: nn.Module, batches: Iterable[Batch], device: torch.device | str = "cpu",
             autocast_dtype: torch.dtype | None = None) -> tuple[list[bool], list[int]]:
    """(whether each example's top-1 prediction is right, that prediction), in the batches'
    order: paired tests compare two models example by example, on correctness or on
    agreement with each other."""
    device = torch.device(device)
    model.eval()
    right: list[bool] = []
    predicted: list[int] = []
    for x, y, *_ in iterate(batches, device):
        with autocast(device.type, autocast_dtype):
            top = model(x).argmax(dim=1)
        right.extend((top == y).tolist())
        predicted.extend(top.tolist())
    return right, predicted


def correctness(model: nn.Module, batches: Iterable[Batch], device: torch.device | str = "cpu",
                autocast_dtype: torch.dtype | None = None) -> list[bool]:
    """Whether each example's top-1 prediction is right, in the batches' order."""
    return outcomes(model, batches, device, autocast_dtype)[0]


def evaluate(model: nn.Module, batches: Iterable[Batch], device: torch.device | str = "cpu",
             autocast_dtype: torch.dtype | None = None) -> float | None:
    """Top-1 accuracy in [0, 1], or None when there is nothing labelled to score."""
    right = correctness(model, batches, device, autocast_dtype)
    return sum(right) / len(right) if right else None
