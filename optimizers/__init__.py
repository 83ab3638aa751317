"""Compression techniques: each is ``apply(model, settings, ctx) -> Outcome`` and never mutates
the model it is given. Pure PyTorch; usable from a notebook as well as from the engine.

Submodules load on first use (PEP 562), so ``optimizers.settings`` can be imported by the
dashboard without pulling in torch, Torch-Pruning and torchao.
"""

from importlib import import_module

from optimizers.settings import (
    AMP_DTYPES,
    INT8_MODES,
    PRUNE_METHODS,
    AmpSettings,
    DistillSettings,
    Int8Settings,
    PruneSettings,
)

_LAZY = {
    "amp": ".amp", "distillation": ".distillation", "pruning": ".pruning",
    "quantization": ".quantization", "chain": ".chain", "lm": ".lm", "training": ".training",
    "base": ".base",
    "Context": ".base", "Outcome": ".base",
    "apply_chain": ".chain", "apply_one": ".chain", "validate_steps": ".chain",
    "scratch": ".distillation",
    "kd_loss": ".distillation", "recover": ".distillation", "train_scratch": ".distillation",
    "sparsity_report": ".pruning", "int8_weight_modules": ".quantization",
    "autocast": ".precision", "registry": ".registry",
}

__all__ = ["AMP_DTYPES", "INT8_MODES", "PRUNE_METHODS", "AmpSettings", "DistillSettings",
           "Int8Settings", "PruneSettings", *_LAZY]


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'optimizers' has no attribute {name!r}")
    module = import_module(_LAZY[name], __name__)
    value = module if _LAZY[name] == f".{name}" else getattr(module, name)
    globals()[name] = value
    return value
