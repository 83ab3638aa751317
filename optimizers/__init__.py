"""Compression techniques: each is ``apply(model, settings, ctx) -> Outcome`` and never mutates
the model it is given. Pure PyTorch; usable from a notebook as well as from the engine."""

from . import amp, distillation, pruning, quantization
from .base import Context, Outcome
from .chain import CHAIN_ORDER, apply_chain, apply_one, scratch, validate_steps
from .distillation import kd_loss, recover, train_scratch
from .pruning import sparsity_report
from .quantization import int8_weight_modules
from .settings import (AMP_DTYPES, INT8_MODES, PRUNE_METHODS, AmpSettings, DistillSettings,
                       Int8Settings, PruneSettings)
from .amp import autocast_context

__all__ = [
    "AMP_DTYPES", "CHAIN_ORDER", "INT8_MODES", "PRUNE_METHODS", "AmpSettings", "Context",
    "DistillSettings", "Int8Settings", "Outcome", "PruneSettings", "amp", "apply_chain",
    "apply_one", "autocast_context", "distillation", "int8_weight_modules", "kd_loss",
    "pruning", "quantization", "recover", "scratch", "sparsity_report", "train_scratch",
    "validate_steps",
]
