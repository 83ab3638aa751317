"""Pruning: unstructured L1 per layer, global magnitude, and structured channel pruning.

``l1`` is the article's method (``prune.l1_unstructured`` then ``prune.remove``): zeros inside
dense tensors, so the model is no faster or smaller until it is compressed (gzip) or run on a
sparse kernel. ``global`` ranks every conv/linear weight together, so layers lose different
fractions. ``channel`` uses Torch-Pruning's dependency graph to physically remove channels: the
layers shrink, and that is what makes a CPU or GPU faster.

Fine-tuning runs while a mask holds the pruned weights at zero, so the sparsity reported after
fine-tuning is exact; the mask is then made permanent (no ``weight_orig``/``weight_mask`` left).
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn.utils import prune

from .base import Context, Outcome
from .counting import count_params
from .errors import described
from .settings import PruneSettings
from .training import FINETUNE_LR_SCALE, fit

PRUNABLE_TYPES = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)


def prunable_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(name, m) for name, m in model.named_modules() if isinstance(m, PRUNABLE_TYPES)]


def _weight(module: nn.Module) -> torch.Tensor:
    # While a mask is attached, ``weight`` is the masked product; that is what the model uses.
    return module.weight


def sparsity_report(model: nn.Module) -> dict:
    """Zeros in conv/linear weights: overall and per layer (fraction zero)."""
    layers, zeros, total = {}, 0, 0
    for name, module in prunable_layers(model):
        w = _weight(module).detach()
        z = int((w == 0).sum())
        layers[name] = z / w.numel()
        zeros += z
        total += w.numel()
    return {"prunable_weights": total, "zero_weights": zeros,
            "effective_sparsity": zeros / total if total else 0.0, "layers": layers}


def _classifier(model: nn.Module, num_classes: int) -> nn.Linear | None:
    """The last Linear emitting ``num_classes`` logits: kept whole so the outputs keep meaning."""
    found = None
    for module in model.modules():
        if isinstance(module, nn.Linear) and module.out_features == num_classes:
            found = module
    return found


def _mask_unstructured(model: nn.Module, settings: PruneSettings) -> None:
    layers = prunable_layers(model)
    if not layers:
        raise RuntimeError("pruning found no Conv/Linear weights to prune in this model")
    if settings.method == "l1":
        for _, module in layers:
            prune.l1_unstructured(module, "weight", amount=settings.ratio)
    else:
        prune.global_unstructured([(m, "weight") for _, m in layers],
                                  pruning_method=prune.L1Unstructured, amount=settings.ratio)


def make_permanent(model: nn.Module) -> nn.Module:
    """Fold every attached mask into its weight (``prune.remove``); returns the model."""
    for _, module in prunable_layers(model):
        if prune.is_pruned(module) and hasattr(module, "weight_orig"):
            prune.remove(module, "weight")
    return model


def freeze_zeros(model: nn.Module) -> nn.Module:
    """Attach a mask over the current zeros of each conv/linear weight, so training keeps them.

    Used to fine-tune an unstructured-pruned model; call ``make_permanent`` afterwards.
    """
    for _, module in prunable_layers(model):
        if not prune.is_pruned(module):
            prune.custom_from_mask(module, "weight", mask=(module.weight.detach() != 0))
    return model


def fit_sparse(model: nn.Module, batches, epochs: int, **fit_kwargs) -> nn.Module:
    """``training.fit`` with the zeros held at zero; the model comes back with plain weights."""
    freeze_zeros(model)
    try:
        fit(model, batches, epochs, **fit_kwargs)
    finally:
        make_permanent(model)
    return model


def _channel_prune(model: nn.Module, settings: PruneSettings, ctx: Context) -> nn.Module:
    import torch_pruning as tp

    classifier = _classifier(model, ctx.num_classes)
    device = next(model.parameters()).device
    example = ctx.example_input[:1].to(device)
    model.eval()
    ignored = [classifier] if classifier is not None else []
    # Attention layers need their head count so Torch-Pruning keeps q/k/v splits consistent;
    # head dims are pruned, the number of heads is kept.
    num_heads = {m: m.num_heads for m in model.modules() if isinstance(m, nn.MultiheadAttention)}
    try:
        pruner = tp.pruner.MagnitudePruner(
            model, example, importance=tp.importance.MagnitudeImportance(p=1),
            pruning_ratio=settings.ratio, ignored_layers=ignored, num_heads=num_heads)
        pruner.step()
        with torch.no_grad():
            model(example)
    except Exception as exc:  # Torch-Pruning raises many types; one line for the sweep
        raise RuntimeError(
            f"channel pruning cannot handle this model ({described(exc)})") from exc
    return model


def _build(model: nn.Module, settings: PruneSettings, ctx: Context) -> nn.Module:
    """The pruned, untrained structure; deterministic for a given model (magnitude criteria)."""
    pruned = copy.deepcopy(model)
    if settings.method == "channel":
        return _channel_prune(pruned, settings, ctx)
    _mask_unstructured(pruned, settings)
    return make_permanent(pruned)


def cache_key(settings: PruneSettings, ctx: Context) -> tuple:
    return ("prune", settings.method, settings.ratio, settings.finetune_epochs,
            ctx.lr * FINETUNE_LR_SCALE, ctx.seed)


def apply(model: nn.Module, settings: PruneSettings, ctx: Context) -> Outcome:
    params_before = count_params(model)[0]
    ctx.progress("prune", 0.0)

    def train(m: nn.Module, epochs) -> None:
        # Every method fine-tunes at a tenth of the training rate (FINETUNE_LR_SCALE); l1 and
        # global hold their zeros at zero while they do.
        tune = fit if settings.method == "channel" else fit_sparse
        tune(m, epochs, settings.finetune_epochs, device=ctx.device,
             lr=ctx.lr * FINETUNE_LR_SCALE, seed=ctx.seed, amp=ctx.train_amp,
             on_progress=lambda f: ctx.progress("prune fine-tune", f))

    if settings.finetune_epochs > 0:
        pruned = ctx.train_cached(cache_key(settings, ctx),
                                  lambda: _build(model, settings, ctx), train)
        # The cache may hand out a shared object: the outcome gets its own copy.
        pruned = copy.deepcopy(pruned)
    else:
        pruned = _build(model, settings, ctx)
    pruned.eval()
    ctx.progress("prune", 1.0)

    report = sparsity_report(pruned)
    config = {"method": settings.method, "ratio": settings.ratio,
              "finetune_epochs": settings.finetune_epochs,
              "nominal_sparsity": settings.ratio if settings.method != "channel" else 0.0,
              "effective_sparsity": round(report["effective_sparsity"], 6),
              "params_before": params_before, "params_after": count_params(pruned)[0]}
    if settings.method == "channel":
        config["channel_ratio"] = settings.ratio
        config["param_fraction"] = round(config["params_after"] / max(params_before, 1), 6)
    return Outcome(model=pruned, config={"prune": config}, layer_sparsity=report["layers"])
