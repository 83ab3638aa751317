"""A causal language model's compression techniques: the registry's ``lm_apply`` of pruning,
INT8, INT4 and AMP (``optimizers.registry``).

Each is ``(model, settings, calibration, only=None) -> (model, config)``: it returns a changed
copy and never mutates the model it is given (``only``: the names of the layers it changes, a
sensitivity map's group; all of them by default); ``calibration`` is a (windows, tokens)
tensor of token ids the technique may read (Wanda's activation norms), never the windows a
variant is scored on. The techniques touch the decoder's linear layers (attention and MLP projections): the
token embedding and the head tied to it stay as they are, as llm-compressor and torchao's
recipes leave them by default, so a quantized variant keeps one shared embedding.

Quantization is torchao's (``quantize_`` with its configs); INT4 on the CPU is its opaque
packed kernel (``torchao.prototype.quantization.int4``, the CPU path of this version).
Pruning writes its mask with ``torch.nn.utils.prune`` (the article's API) and makes it
permanent, as the image models' pruning does.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from optimizers.settings import AmpSettings, Int4Settings, Int8Settings, PruneSettings

HEAD_NAMES = ("lm_head",)
# Tokens of calibration text Wanda reads per batch (its norms are sums: batches only bound
# memory).
CALIBRATION_BATCH = 8


def decoder_linears(model: nn.Module, only=None) -> dict[str, nn.Linear]:
    """{name: layer} of the linear layers a technique changes: all but the output head;
    with ``only`` (a set of names), those of them (a sensitivity map's group)."""
    return {name: m for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and name.rpartition(".")[2] not in HEAD_NAMES
            and (only is None or name in only)}


def _smoke(model: nn.Module, calibration: torch.Tensor, what: str) -> None:
    """One short forward: a kernel this build lacks fails here, as one line, not mid-run."""
    ids = calibration[:1, :8]
    try:
        with torch.inference_mode():
            model(input_ids=ids, use_cache=False)
    except Exception as exc:  # the kernel's own error, whatever its type
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise RuntimeError(f"{what} does not run on this build: {first[:200]}") from None


def _quantized(model: nn.Module, config, what: str, calibration: torch.Tensor, only=None
               ) -> tuple[nn.Module, int, str]:
    from torchao.quantization import quantize_
    out = copy.deepcopy(model)
    names = set(decoder_linears(out, only))
    quantize_(out, config, filter_fn=lambda module, fqn: fqn in names)
    kinds = {type(m.weight).__name__ for n, m in decoder_linears(out).items()}
    done = sum(1 for m in decoder_linears(out).values()
               if type(m.weight) is not nn.Parameter and type(m.weight) is not torch.Tensor)
    if not done:
        raise RuntimeError(f"{what} quantized none of the model's {len(names)} linear layers")
    _smoke(out, calibration, what)
    return out, done, ", ".join(sorted(kinds - {"Parameter", "Tensor"}))


def int8(model: nn.Module, settings: Int8Settings, calibration: torch.Tensor, only=None):
    from torchao.quantization import (Int8DynamicActivationInt8WeightConfig,
                                      Int8WeightOnlyConfig)
    config = Int8WeightOnlyConfig() if settings.mode == "weight-only" else \
        Int8DynamicActivationInt8WeightConfig()
    out, layers, kernel = _quantized(model, config, f"INT8 {settings.mode}", calibration,
                                     only)
    return out, {"int8": {"mode": settings.mode, "layers": layers, "weights": kernel,
                          "path": "torchao"}}


def int4(model: nn.Module, settings: Int4Settings, calibration: torch.Tensor, only=None):
    from torchao.prototype.quantization.int4.inference_workflow import (
        PrototypeInt4WeightOnlyConfig)
    if any(type(m.weight) is not nn.Parameter for m in decoder_linears(model).values()):
        raise ValueError("INT4 quantizes float weights: a variant takes one of int8 and int4")
    # Layers whose input width the group size does not divide stay float (torchao skips them).
    out, layers, kernel = _quantized(
        model, PrototypeInt4WeightOnlyConfig(group_size=settings.group_size,
                                             set_inductor_config=False),
        f"INT4 in groups of {settings.group_size}", calibration, only)
    widths = sorted({m.in_features for m in decoder_linears(model, only).values()
                     if m.in_features % settings.group_size})
    total = len(decoder_linears(model, only))
    return out, {"int4": {"group_size": settings.group_size, "layers": layers,
                          "float_layers": total - layers, "weights": kernel,
                          "path": "torchao",
                          **({"float_widths": widths} if widths else {})}}


class Autocast(nn.Module):
    """A model run under CPU autocast, its logits handed back in fp32 (the quality figures
    compare log-probabilities, which bf16 would round)."""

    def __init__(self, model: nn.Module, dtype: torch.dtype):
        super().__init__()
        self.model, self.dtype = model, dtype
        self.config = getattr(model, "config", None)

    def forward(self, *args, **kwargs):
        with torch.autocast("cpu", dtype=self.dtype):
            out = self.model(*args, **kwargs)
        out.logits = out.logits.float()
        return out


def amp(model: nn.Module, settings: AmpSettings, calibration: torch.Tensor):
    from optimizers.precision import AMP_TORCH_DTYPES
    dtype = settings.resolved("cpu")
    out = Autocast(model, AMP_TORCH_DTYPES[dtype])
    _smoke(out, calibration, f"autocast {dtype}")
    return out, {"amp": {"dtype": dtype, "device": "cpu"}}


# ---- pruning ---------------------------------------------------------------------------------

def input_norms(model: nn.Module, calibration: torch.Tensor) -> dict[str, torch.Tensor]:
    """{layer: the L2 norm of each input feature over every calibration token} (Wanda's
    activation statistic), from forward hooks on the decoder's linear layers."""
    layers = decoder_linears(model)
    sums = {name: torch.zeros(layer.in_features, dtype=torch.float64)
            for name, layer in layers.items()}

    def hook(name):
        def record(_module, args, _output):
            x = args[0].detach().reshape(-1, args[0].shape[-1]).double()
            sums[name] += (x * x).sum(0)
        return record
    handles = [layer.register_forward_hook(hook(name)) for name, layer in layers.items()]
    try:
        with torch.inference_mode():
            for i in range(0, len(calibration), CALIBRATION_BATCH):
                model(input_ids=calibration[i:i + CALIBRATION_BATCH], use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    return {name: total.sqrt().float() for name, total in sums.items()}


def prune_mask(score: torch.Tensor, method: str, ratio: float) -> torch.Tensor:
    """Keep-mask (1: kept) of a weight's scores: the lowest ``ratio`` of the layer
    (magnitude) or of each output row (Wanda); with "-2:4", the lowest 2 of each 4
    consecutive weights of a row."""
    out_features, in_features = score.shape
    if method.endswith("-2:4"):
        if in_features % 4:
            raise ValueError(f"2:4 pruning needs an input width divisible by 4; a layer has "
                             f"{in_features}")
        groups = score.reshape(out_features, in_features // 4, 4)
        drop = groups.argsort(-1)[..., :2]
        mask = torch.ones_like(groups).scatter_(-1, drop, 0.0)
        return mask.reshape(out_features, in_features)
    mask = torch.ones_like(score)
    if method == "wanda":
        k = int(ratio * in_features)
        if k:
            mask.scatter_(1, score.argsort(1)[:, :k], 0.0)
        return mask
    k = int(ratio * score.numel())
    if k:
        mask.view(-1)[score.flatten().argsort()[:k]] = 0.0
    return mask


def prune(model: nn.Module, settings: PruneSettings, calibration: torch.Tensor, only=None):
    from torch.nn.utils import prune as torch_prune
    out = copy.deepcopy(model)
    wanda = settings.method.startswith("wanda")
    norms = input_norms(out, calibration) if wanda else {}
    kept = total = 0
    for name, layer in decoder_linears(out, only).items():
        weight = layer.weight.detach()
        score = weight.abs() * norms[name][None, :] if wanda else weight.abs()
        mask = prune_mask(score, settings.method, settings.ratio)
        torch_prune.custom_from_mask(layer, "weight", mask)
        torch_prune.remove(layer, "weight")
        kept += int(mask.sum())
        total += mask.numel()
    config = {"method": settings.method, "ratio": settings.ratio,
              "sparsity": round(1 - kept / total, 6),
              "layers": len(decoder_linears(out, only)),
              "finetune_epochs": 0}
    if wanda:
        config["calibration_tokens"] = int(calibration.numel())
    return out, {"prune": config}


def not_for_images(*_args, **_kwargs):
    """INT4's image ``apply``: the registry's family check refuses it before a run starts."""
    raise ValueError("int4 applies to language models only")
