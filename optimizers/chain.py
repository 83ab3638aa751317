"""Single techniques and chains of them, in the one order that makes sense.

Order: prune -> distill -> int8 -> amp. Pruning first removes weights; distillation then
*recovers the pruned model from its unpruned teacher* (a KD fine-tune of the pruned model,
Minitron-style prune-then-distill) rather than training a separate student, so the chain
compresses one model instead of swapping it; INT8 quantizes the recovered weights; AMP last only
sets the autocast dtype at run time. Without a prune step, distill in a chain trains the
student as on its own.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import torch
from torch import nn

from . import amp, distillation, pruning, quantization
from .base import Context, Outcome
from .settings import AmpSettings, DistillSettings, Int8Settings, PruneSettings

CHAIN_ORDER = ("prune", "distill", "int8", "amp")
SETTINGS_TYPES = {"prune": PruneSettings, "distill": DistillSettings, "int8": Int8Settings,
                  "amp": AmpSettings}
APPLY = {"prune": pruning.apply, "distill": distillation.apply, "int8": quantization.apply,
         "amp": amp.apply}


def _check_settings(technique: str, settings) -> None:
    if technique not in SETTINGS_TYPES:
        raise ValueError(f"technique must be one of {', '.join(CHAIN_ORDER)}; got {technique!r}")
    expected = SETTINGS_TYPES[technique]
    if not isinstance(settings, expected):
        raise ValueError(f"{technique} needs {expected.__name__}, got {type(settings).__name__}")


def validate_steps(steps: list[tuple[str, object]]) -> None:
    if not steps:
        raise ValueError("a chain needs at least one technique")
    names = [name for name, _ in steps]
    for name, settings in steps:
        _check_settings(name, settings)
    if len(set(names)) != len(names):
        raise ValueError(f"a chain applies each technique once; got {', '.join(names)}")
    if names != sorted(names, key=CHAIN_ORDER.index):
        raise ValueError(f"chain order must follow {' -> '.join(CHAIN_ORDER)}; "
                         f"got {' -> '.join(names)}")


def apply_one(model: nn.Module, technique: str, settings, ctx: Context) -> Outcome:
    """One technique on ``model``; "student-scratch" builds the distillation control."""
    if technique == "student-scratch":
        return scratch(settings, ctx)
    _check_settings(technique, settings)
    return APPLY[technique](model, settings, ctx)


def scratch(settings: DistillSettings, ctx: Context) -> Outcome:
    return distillation.train_scratch(settings, ctx)


def _step_key(technique: str, config: dict) -> tuple:
    # Later steps' cached weights depend on every earlier step: their config joins the key.
    return (technique, json.dumps(config, sort_keys=True, default=str))


def _amp_after_int8(current: Outcome, settings: AmpSettings, ctx: Context) -> Outcome:
    """AMP on an INT8 model: kept only if autocast runs it and changes something."""
    dtype_name = settings.resolved("cpu")
    model = current.model
    x = ctx.example_input[:2].to("cpu")
    try:
        with torch.inference_mode():
            plain = model(x)
            with amp.autocast_context("cpu", dtype_name):
                cast = model(x)
    except Exception as exc:
        reason = f"autocast {dtype_name} fails on the INT8 model: {quantization._one_line(exc)}"
        return Outcome(model=model, config={"amp": {"dtype": dtype_name, "skipped": reason}})
    if cast.dtype == plain.dtype and torch.equal(cast, plain):
        reason = ("INT8 kernels ignore autocast: the output is identical with and without it, "
                  "so autocast is not applied")
        return Outcome(model=model, config={"amp": {"dtype": dtype_name, "skipped": reason}})
    return amp.apply(model, settings, ctx, device_type="cpu")


def apply_chain(model: nn.Module, steps: list[tuple[str, object]], ctx: Context) -> Outcome:
    """Apply ``steps`` [(technique, settings), ...] in CHAIN_ORDER; configs are merged."""
    validate_steps(steps)
    current = Outcome(model=model)
    config: dict = {}
    step_ctx = ctx
    prune_settings: PruneSettings | None = None
    for technique, settings in steps:
        if technique == "distill" and prune_settings is not None:
            teacher = ctx.teacher if ctx.teacher is not None else model
            epochs = settings.epochs or max(prune_settings.finetune_epochs, 1)
            out = distillation.recover(current.model, teacher, settings, step_ctx, epochs,
                                       keep_zeros=prune_settings.method != "channel")
            out.layer_sparsity = pruning.sparsity_report(out.model)["layers"]
            config["prune"]["effective_sparsity_after_recover"] = round(
                pruning.sparsity_report(out.model)["effective_sparsity"], 6)
        elif technique == "amp" and current.device is not None and current.device.type == "cpu" \
                and "int8" in config:
            out = _amp_after_int8(current, settings, step_ctx)
        else:
            out = APPLY[technique](current.model, settings, step_ctx)
        if technique == "prune":
            prune_settings = settings
        config.update(out.config)
        current = Outcome(
            model=out.model, config=config,
            device=out.device if out.device is not None else current.device,
            autocast_dtype=out.autocast_dtype or current.autocast_dtype,
            flops_hint=out.flops_hint if out.flops_hint is not None else current.flops_hint,
            layer_sparsity=out.layer_sparsity if out.layer_sparsity is not None
            else current.layer_sparsity)
        step_ctx = dataclasses.replace(
            step_ctx, base_key=tuple(step_ctx.base_key) + _step_key(technique, out.config))
    current.config = copy.deepcopy(config)
    return current
