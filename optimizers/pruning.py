"""Pruning: unstructured L1 per layer, global magnitude, and structured channel pruning.

``l1`` is the article's method (``prune.l1_unstructured`` then ``prune.remove``): zeros inside
dense tensors, so the model is no faster or smaller until it is compressed (gzip) or run on a
sparse kernel. ``global`` ranks every conv/linear weight together, so layers lose different
fractions. ``channel`` uses Torch-Pruning's dependency graph to physically remove channels: the
layers shrink, and that is what makes a CPU or GPU faster. Attention is pruned head by head
(its head counts given to Torch-Pruning, as its ViT examples do); where one graph cannot span
the model (ShuffleNet's channel shuffle, windowed attention in Swin and MaxViT), each block's
inner channels are pruned with a graph of that block alone, and the config says so. A
schedule (``PruneSettings.schedule``) gives groups their own ratios: a Torch-Pruning group by
its root layer (``channel_groups`` lists them), a layer's weight for l1.

Fine-tuning runs while a mask holds the pruned weights at zero, so the sparsity reported after
fine-tuning is exact; the mask is then folded into the weights (plain tensors are saved).
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn.utils import prune

from optimizers.base import Context, Outcome, forward_seen
from optimizers.counting import count_params
from optimizers.errors import described, time_limit
from optimizers.schedules import parse_schedule, schedule_levels
from optimizers.settings import PruneSettings
from optimizers.training import FINETUNE_LR_SCALE, fit

PRUNABLE_TYPES = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)
# Torch-Pruning's group search takes seconds on the largest torchvision CNNs here (DenseNet-121:
# 3.4 s on a shared core) and never ends on a few graphs: it is given up after this long, for
# the whole model, then for each block.
MODEL_SEARCH_S = 60.0
BLOCK_SEARCH_S = 15.0


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


def classifier_layer(model: nn.Module, num_classes: int) -> nn.Module | None:
    """The last layer emitting ``num_classes`` logits (a Linear, or a 1x1 convolution as in
    SqueezeNet): kept whole so the outputs keep their meaning."""
    found = None
    for module in model.modules():
        if (isinstance(module, nn.Linear) and module.out_features == num_classes) or (
                isinstance(module, nn.Conv2d) and module.out_channels == num_classes):
            found = module
    return found


def _mask_unstructured(model: nn.Module, settings: PruneSettings) -> None:
    layers = prunable_layers(model)
    if not layers:
        raise RuntimeError("pruning found no Conv/Linear weights to prune in this model")
    if settings.method == "l1":
        levels = schedule_levels(settings.schedule) if settings.schedule else {}
        _check_named(model, levels)
        for name, module in layers:
            amount = levels.get(name, settings.ratio)
            if amount > 0 or not levels:
                prune.l1_unstructured(module, "weight", amount=amount)
    else:
        prune.global_unstructured([(m, "weight") for _, m in layers],
                                  pruning_method=prune.L1Unstructured, amount=settings.ratio)


def make_permanent(model: nn.Module) -> nn.Module:
    """Fold every attached mask into its weight (``prune.remove``); returns the model."""
    for _, module in prunable_layers(model):
        if prune.is_pruned(module) and hasattr(module, "weight_orig"):
            prune.remove(module, "weight")
    return model


class _KeepZeros(nn.Module):
    """A parametrization holding a weight's zeros at zero while it trains."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.register_buffer("mask", (weight.detach() != 0).to(weight.dtype))

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return weight * self.mask


def fit_sparse(model: nn.Module, batches, epochs: int, **fit_kwargs) -> nn.Module:
    """``training.fit`` with the zeros held at zero; the model comes back with plain weights.

    The mask is a parametrization (recomputed whenever ``weight`` is read), not a
    forward pre-hook as ``torch.nn.utils.prune`` attaches: nn.MultiheadAttention reads its
    ``out_proj.weight`` without calling that layer, so a hook's weight would go stale."""
    from torch.nn.utils import parametrize
    layers = prunable_layers(model)
    for _, module in layers:
        parametrize.register_parametrization(module, "weight", _KeepZeros(module.weight))
    try:
        fit(model, batches, epochs, **fit_kwargs)
    finally:
        for _, module in layers:
            parametrize.remove_parametrizations(module, "weight", leave_parametrized=True)
    return model


def _windowed_attention(model: nn.Module) -> bool:
    """Attention over windows with a relative-position index (Swin, MaxViT, BEiT...):
    Torch-Pruning's group search does not finish on their graphs (its own torchvision
    benchmark lists Swin as unsupported), so such models are pruned block by block."""
    return any(hasattr(m, "relative_position_index") for m in model.modules())


def _heads(model: nn.Module) -> dict[nn.Module, int]:
    """Attention layers and their head counts, so q/k/v are pruned head by head:
    nn.MultiheadAttention (torchvision's ViT) and timm-style blocks with a ``qkv`` Linear."""
    heads = {}
    for m in model.modules():
        if isinstance(m, nn.MultiheadAttention):
            heads[m] = m.num_heads
        elif isinstance(getattr(m, "qkv", None), nn.Linear) and isinstance(
                getattr(m, "num_heads", None), int):
            heads[m.qkv] = m.num_heads
    return heads


def _after_pruning(model: nn.Module) -> None:
    """Attributes the forward passes read that Torch-Pruning does not know about (as its
    torchvision and timm examples set them)."""
    if hasattr(model, "hidden_dim") and isinstance(getattr(model, "conv_proj", None),
                                                   nn.Conv2d):
        model.hidden_dim = model.conv_proj.out_channels  # torchvision's VisionTransformer
    for m in model.modules():
        qkv = getattr(m, "qkv", None)
        if isinstance(qkv, nn.Linear) and isinstance(getattr(m, "num_heads", None), int) \
                and hasattr(m, "head_dim"):
            m.head_dim = qkv.out_features // (3 * m.num_heads)
            if hasattr(m, "attn_dim"):
                m.attn_dim = m.head_dim * m.num_heads


def _prune_graph(model: nn.Module, example: torch.Tensor, ratio: float,
                 ignored: list[nn.Module], seconds: float, levels: dict | None = None,
                 on_groups=None) -> None:
    """Torch-Pruning over the dependency graph of ``model``: every coupled group of channels
    loses ``ratio`` of them by L1 magnitude (a group whose root layer ``levels`` names, by its
    name in ``model``, loses that fraction instead), except the groups of ``ignored`` layers.
    ``on_groups(groups)`` sees the pruner's groups before it prunes. Its group search runs
    without end on some graphs (windowed attention, RexNet's partial residual): past
    ``seconds`` it is given up (TimeoutError)."""
    import warnings

    import torch_pruning as tp
    per_group = {m: levels[n] for n, m in model.named_modules() if n in (levels or {})}
    with warnings.catch_warnings(), time_limit(seconds, "Torch-Pruning's group search"):
        # "will prune the last non-singleton dimension" of ViT's class token and position
        # embedding, ConvNeXt's layer scale: the embedding dimension, which is right.
        warnings.simplefilter("ignore", UserWarning)
        pruner = tp.pruner.MagnitudePruner(
            model, example, importance=tp.importance.MagnitudeImportance(p=1),
            pruning_ratio=ratio, ignored_layers=ignored, num_heads=_heads(model),
            pruning_ratio_dict=per_group or None)
        if on_groups is not None:
            on_groups(list(pruner.DG.get_all_groups(ignored_layers=pruner.ignored_layers,
                                                    root_module_types=pruner.root_module_types)))
        pruner.step()
    _after_pruning(model)


def _group_record(model: nn.Module, group, prefix: str = "") -> dict:
    """A Torch-Pruning group as plain data: its root layer (the one whose output channels it
    starts from: how a schedule names it), every layer whose channels change with it, in the
    model's order, and how many channels it has. Names are ``model``'s, under ``prefix``."""
    index = {m: i for i, m in enumerate(model.modules())}
    names = {m: (f"{prefix}.{n}" if n else prefix) if prefix else n
             for n, m in model.named_modules()}
    members = {m for dep, _ in group for m in (dep.source.module, dep.target.module)
               if m in names}
    return {"root": names[group[0].dep.target.module],
            "modules": [names[m] for m in sorted(members, key=index.get)],
            "channels": len(group[0].idxs)}


def _inputs_and_order(model: nn.Module, example: torch.Tensor) -> tuple[dict, list[str]]:
    """Each module's input on one forward pass (None when it is not one tensor), by name,
    and the order in which the prunable layers ran."""
    inputs: dict[str, torch.Tensor | None] = {}
    order: list[str] = []

    def hook(name, module, args):
        if name not in inputs:
            one = len(args) == 1 and isinstance(args[0], torch.Tensor)
            inputs[name] = args[0].detach() if one else None
        if isinstance(module, PRUNABLE_TYPES) and name not in order:
            order.append(name)
    forward_seen(model, example, hook)
    return inputs, order


def _prune_blocks(model: nn.Module, example: torch.Tensor, ratio: float,
                  protected: list[nn.Module], levels: dict | None = None,
                  found: list | None = None) -> int:
    """Where one graph cannot span the model, prune each block's inner channels with a
    graph of that block alone: the layer it runs last is ignored, so the block's output width
    (its coupling to the rest of the model) stays; a block whose output still changes is
    restored and its parts are tried instead. Windowed attention itself is left whole; its
    blocks' MLPs are pruned. ``found`` receives the groups of the blocks pruned. Returns how
    many blocks were pruned."""
    inputs, order = _inputs_and_order(model, example)
    pruned = 0
    endless: set[type] = set()  # block types whose search timed out: their parts are tried

    def visit(prefix: str) -> None:
        nonlocal pruned
        parent = model.get_submodule(prefix) if prefix else model
        for child_name, child in list(parent.named_children()):
            name = f"{prefix}.{child_name}" if prefix else child_name
            layers = [n for n, m in child.named_modules(prefix=name)
                      if isinstance(m, PRUNABLE_TYPES) and n in order]
            if len(layers) < 2:
                continue
            x = inputs.get(name)
            if x is None or type(child) in endless or _windowed_attention(child):
                visit(name)
                continue
            last = model.get_submodule(max(layers, key=order.index))
            outcome = _prune_block(parent, child_name, child, x, ratio, [last, *protected],
                                   _within(levels, name), found, name)
            if outcome == "pruned":
                pruned += 1
            elif outcome != "unchanged":
                if outcome == "timed out":
                    endless.add(type(child))
                visit(name)
    visit("")
    return pruned


def _within(levels: dict | None, prefix: str) -> dict | None:
    """The levels of the layers under ``prefix``, named as inside it."""
    if not levels:
        return None
    start = prefix + "."
    return {n[len(start):]: r for n, r in levels.items() if n.startswith(start)}


def _prune_block(parent: nn.Module, child_name: str, block: nn.Module, x: torch.Tensor,
                 ratio: float, ignored: list[nn.Module], levels: dict | None = None,
                 found: list | None = None, prefix: str = "") -> str:
    """"pruned", "unchanged" (nothing inside could go), "failed" or "timed out" (restored)."""
    backup = copy.deepcopy(block)
    params = count_params(block)[0]
    groups: list = []
    with torch.no_grad():
        before = block(x).shape
    try:
        _prune_graph(block, x, ratio, ignored, BLOCK_SEARCH_S, levels,
                     lambda gs: groups.extend(_group_record(block, g, prefix) for g in gs))
        with torch.no_grad():
            if block(x).shape != before:
                raise RuntimeError("the block's output width changed")
    except Exception as exc:  # Torch-Pruning raises many types: restored, parts tried
        setattr(parent, child_name, backup)
        return "timed out" if isinstance(exc, TimeoutError) else "failed"
    if count_params(block)[0] < params:
        if found is not None:
            found.extend(groups)
        return "pruned"
    return "unchanged"


def _check_logits(model: nn.Module, example: torch.Tensor, num_classes: int) -> None:
    with torch.no_grad():
        out = model(example)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (len(example), num_classes):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise RuntimeError(f"the pruned model returns {got}, not ({len(example)}, "
                           f"{num_classes}) logits")


def _channel_prune(model: nn.Module, settings: PruneSettings, ctx: Context,
                   info: dict, found: list | None = None) -> nn.Module:
    """Torch-Pruning over the whole model's graph; where that graph cannot be built or
    searched (channel shuffles, windowed attention), block by block. ``info`` receives the
    scope, for the variant's config; ``found`` the groups (``_group_record``) it pruned."""
    device = next(model.parameters()).device
    example = ctx.data.example_input[:1].to(device)
    model.eval()
    levels = schedule_levels(settings.schedule) if settings.schedule else None
    _check_named(model, levels)

    def protected(m: nn.Module) -> list[nn.Module]:
        classifier = classifier_layer(m, ctx.data.num_classes)
        return [classifier] if classifier is not None else []

    reason = ("windowed attention, on whose graph Torch-Pruning's group search does not "
              "finish") if _windowed_attention(model) else None
    if reason is None:
        whole = copy.deepcopy(model)  # a failed attempt may leave layers half pruned
        groups: list = []
        try:
            _prune_graph(whole, example, settings.ratio, protected(whole), MODEL_SEARCH_S,
                         levels, lambda gs: groups.extend(_group_record(whole, g) for g in gs))
            _check_logits(whole, example, ctx.data.num_classes)
            info["scope"] = "model"
            if found is not None:
                found.extend(groups)
            return whole
        except Exception as exc:  # Torch-Pruning raises many types; the blocks are tried
            reason = f"one graph over the model failed: {described(exc)}"
    try:
        blocks = _prune_blocks(model, example, settings.ratio, protected(model), levels,
                               found)
        _check_logits(model, example, ctx.data.num_classes)
    except Exception as exc:
        raise RuntimeError(f"channel pruning cannot handle this model ({reason}; block by "
                           f"block: {described(exc)})") from exc
    if blocks == 0:
        raise RuntimeError(f"channel pruning cannot handle this model ({reason}) and found no "
                           f"block whose inner channels it could prune alone")
    info.update(scope="blocks", blocks=blocks, why=reason)
    return model


def _check_named(model: nn.Module, levels: dict | None) -> None:
    """A schedule names layers of this model (that they are groups' roots is checked where
    the schedule is read, against the groups themselves)."""
    missing = sorted(set(levels or {}) - {n for n, _ in prunable_layers(model)})
    if missing:
        raise ValueError(f"the schedule names layers this model does not have: "
                         f"{', '.join(missing[:8])}")


def channel_groups(model: nn.Module, ctx: Context) -> tuple[list[dict], dict]:
    """The groups channel pruning prunes together on ``model`` ([{"root", "modules",
    "channels"}]) and how it reaches them ({"scope": "model"} or the blocks, and why), found
    the way ``apply`` prunes (on a copy): one graph over the model, else block by block."""
    found: list[dict] = []
    info: dict = {}
    _channel_prune(copy.deepcopy(model), PruneSettings(0.5, "channel", 0), ctx, info, found)
    return [g for g in found if g["channels"] >= 2], info


def _build(model: nn.Module, settings: PruneSettings, ctx: Context,
           info: dict | None = None) -> nn.Module:
    """The pruned, untrained structure; deterministic for a given model (magnitude criteria).
    ``info`` receives how channel pruning went (its scope)."""
    pruned = copy.deepcopy(model)
    if settings.method == "channel":
        return _channel_prune(pruned, settings, ctx, {} if info is None else info)
    _mask_unstructured(pruned, settings)
    return make_permanent(pruned)


def cache_key(settings: PruneSettings, ctx: Context) -> tuple:
    key = ("prune", settings.method, settings.ratio, settings.finetune_epochs,
           ctx.budget.lr * FINETUNE_LR_SCALE, ctx.budget.seed)
    if settings.schedule:  # only then, so the keys of uniform ratios stay as they were
        key += ("schedule", sorted(schedule_levels(settings.schedule).items()))
    return key


def apply(model: nn.Module, settings: PruneSettings, ctx: Context) -> Outcome:
    params_before = count_params(model)[0]
    ctx.progress("prune", 0.0)

    def train(m: nn.Module, epochs) -> None:
        # Every method fine-tunes at a tenth of the training rate (FINETUNE_LR_SCALE); l1 and
        # global hold their zeros at zero while they do.
        tune = fit if settings.method == "channel" else fit_sparse
        tune(m, epochs, settings.finetune_epochs, device=ctx.device,
             lr=ctx.budget.lr * FINETUNE_LR_SCALE, seed=ctx.budget.seed, amp=ctx.budget.amp,
             on_progress=lambda f: ctx.progress("prune fine-tune", f))

    info: dict = {}
    if settings.finetune_epochs > 0:
        pruned = ctx.train_cached(cache_key(settings, ctx),
                                  lambda: _build(model, settings, ctx, info), train)
        # The cache may hand out a shared object: the outcome gets its own copy.
        pruned = copy.deepcopy(pruned)
    else:
        pruned = _build(model, settings, ctx, info)
    pruned.eval()
    ctx.progress("prune", 1.0)

    report = sparsity_report(pruned)
    config = {"method": settings.method, "ratio": settings.ratio,
              "finetune_epochs": settings.finetune_epochs,
              "nominal_sparsity": settings.ratio if settings.method != "channel" else 0.0,
              "effective_sparsity": round(report["effective_sparsity"], 6),
              "params_before": params_before, "params_after": count_params(pruned)[0]}
    if settings.schedule:
        config["schedule"] = parse_schedule(settings.schedule)
    if settings.method == "channel":
        config.update(info)
        config["channel_ratio"] = settings.ratio
        config["param_fraction"] = round(config["params_after"] / max(params_before, 1), 6)
    return Outcome(model=pruned, config={"prune": config}, layer_sparsity=report["layers"])
