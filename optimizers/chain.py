"""Single techniques and chains of them, dispatched through the technique registry.

A chain applies its steps in the registry's order (prune -> distill -> int8 -> amp for the
built-in ones). Each step sees what came before it in ``Context.prior`` and where the model
now runs in ``Context.lineage.model_device``, and decides for itself what that means: distillation
after pruning recovers the pruned model from its unpruned teacher instead of training a
separate student, AMP after a step that moved the model to the CPU (INT8) checks that
autocast still changes anything. Nothing here names a technique.
"""

from __future__ import annotations

import copy
import json

from torch import nn

from optimizers import registry
from optimizers.base import Context, Outcome, Step


def validate_steps(steps: list[tuple[str, object]]) -> None:
    if not steps:
        raise ValueError("a chain needs at least one technique")
    for name, settings in steps:
        expected = registry.get(name).settings
        if not isinstance(settings, expected):
            raise ValueError(f"{name} needs {expected.__name__}, got {type(settings).__name__}")
    registry.check_order([name for name, _ in steps])


def apply_one(model: nn.Module, technique: str, settings, ctx: Context) -> Outcome:
    """One technique on ``model``, or a technique's control (e.g. "student-scratch")."""
    control = registry.control(technique)
    if control is not None:
        return control.apply_fn()(settings, ctx)
    return apply_chain(model, [(technique, settings)], ctx)


def _step_key(technique: str, config: dict) -> tuple:
    # Later steps' cached weights depend on every earlier step: their config joins the key.
    return (technique, json.dumps(config, sort_keys=True, default=str))


def apply_chain(model: nn.Module, steps: list[tuple[str, object]], ctx: Context) -> Outcome:
    """Apply ``steps`` [(technique, settings), ...] in chain order; configs are merged."""
    validate_steps(steps)
    current = Outcome(model=model)
    config: dict = {}
    # The unpruned model teaches a chain's distillation step when the context names none.
    step_ctx = ctx if ctx.teaching.teacher is not None else ctx.taught_by(model)
    for technique, settings in steps:
        out = registry.get(technique).apply_fn()(current.model, settings, step_ctx)
        config.update(out.config)
        current = Outcome(
            model=out.model, config=config,
            device=out.device if out.device is not None else current.device,
            autocast_dtype=out.autocast_dtype or current.autocast_dtype,
            flops_hint=out.flops_hint if out.flops_hint is not None else current.flops_hint,
            layer_sparsity=out.layer_sparsity if out.layer_sparsity is not None
            else current.layer_sparsity,
            memory_format=out.memory_format or current.memory_format)
        step_ctx = step_ctx.then(Step(technique, settings, out.config), current.device,
                                 _step_key(technique, out.config))
    current.config = copy.deepcopy(config)
    return current
