"""The unit of a sensitivity map: a group, never a bare module.

- ``prune.channel``: a Torch-Pruning dependency group, every layer whose channels must change
  together (a residual stage's convolutions and batch norms are one group), found the way
  channel pruning prunes (``optimizers.pruning.channel_groups``: one graph over the model,
  else block by block, with its time limits);
- ``prune.l1``: one layer's weight;
- ``int8.static``: the quantizer group of one fused op in FX's prepared graph (the
  convolution or linear layer, the batch norm and ReLU folded into it, its input, weight and
  output observers); ``int8.dynamic``: one Linear/LSTM/GRU layer.

A group is named by its root module: that is how a schedule names it, and a schedule naming
a group the model does not have, or written for another model, is refused here.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.sensitivity.config import is_pruning
from optimizers.errors import described


@dataclass(frozen=True)
class Group:
    root: str                      # the module that names it
    modules: tuple[str, ...]       # every module that changes with it, in the model's order
    kind: str                      # the technique
    channels: int | None = None    # channel pruning: how many channels the group has
    observers: tuple[str, ...] = ()  # INT8: its quantizers

    def to_dict(self) -> dict:
        out = {"root": self.root, "group": list(self.modules), "kind": self.kind}
        if self.channels is not None:
            out["channels"] = self.channels
        if self.observers:
            out["observers"] = list(self.observers)
        return out


def find_groups(model, technique: str, ctx, model_name: str) -> tuple[list[Group], dict]:
    """The groups of ``technique`` on ``model`` and how they were found ({"scope": ...});
    ValueError (one line, naming the model) when there are none."""
    if technique == "prune.channel":
        from optimizers.pruning import channel_groups
        found, info = channel_groups(model, ctx)
        groups = [Group(g["root"], tuple(g["modules"]), technique, g["channels"])
                  for g in found]
        why = "no group of two or more channels outside the classifier"
    elif technique == "prune.l1":
        from optimizers.pruning import prunable_layers
        groups = [Group(name, (name,), technique) for name, _ in prunable_layers(model)]
        info, why = {"scope": "layers"}, "no Conv or Linear layer"
    else:
        groups, info, why = _quantizer_groups(model, technique, ctx, model_name)
    if not groups:
        raise ValueError(f"{technique} finds no groups on model {model_name}: {why}")
    return groups, info


def _quantizer_groups(model, technique: str, ctx, model_name: str):
    from optimizers.quantization import DYNAMIC_TYPES, quantizer_groups
    mode = technique.split(".", 1)[1]
    if mode == "dynamic":
        info = {"scope": "layers"}
        if not any(isinstance(m, DYNAMIC_TYPES) for m in model.modules()):
            last = [(n, type(m).__name__) for n, m in model.named_modules()
                    if hasattr(m, "weight")]
            tail = f" (its last layer, {last[-1][0]}, is a {last[-1][1]})" if last else ""
            return [], info, (f"dynamic INT8 quantizes Linear/LSTM/GRU layers and this model "
                              f"has none{tail}; try int8.static")
        why = "the forward calls none of its Linear/LSTM/GRU layers"
    else:
        info, why = {"scope": "fx"}, "FX's prepared graph holds no op with a weight"
    try:
        found = quantizer_groups(model, ctx.data.example_input[:2], mode)
    except Exception as exc:  # FX's symbolic trace raises many types
        raise ValueError(f"{technique} groups are the fused ops of FX's prepared graph, and "
                         f"FX cannot trace model {model_name}: {described(exc)}") from exc
    groups = [Group(g["root"], tuple(g["modules"]), technique,
                    observers=tuple(g["observers"])) for g in found]
    return groups, info, why


def cell_schedule(technique: str, group: Group, level: float, groups: list[Group]) -> dict:
    """The schedule of one cell: the group at ``level``; for INT8 the others kept float."""
    if is_pruning(technique):
        levels = {group.root: level}
    else:
        levels = {g.root: 0 for g in groups}
        levels[group.root] = 1
    return {"technique": technique, "groups": levels}


def check_schedule(doc: dict, groups: list[Group], model_name: str) -> None:
    """A schedule (already well formed, ``optimizers.schedules``) fits this model: written
    for it, and naming only groups it has. ValueError names the model or the groups."""
    written_for = doc.get("model")
    if written_for is not None and written_for != model_name:
        raise ValueError(f"the schedule was written for model {written_for}; this run's "
                         f"model is {model_name}")
    roots = [g.root for g in groups]
    unknown = [root for root in doc["groups"] if root not in roots]
    if unknown:
        shown = ", ".join(roots[:12]) + (", ..." if len(roots) > 12 else "")
        raise ValueError(f"the schedule names groups model {model_name} does not have for "
                         f"{doc['technique']}: {', '.join(unknown[:8])} (its groups: {shown})")


def check_sweep_schedule(sweep, variant) -> None:
    """Before a sweep runs: the schedule its variant applies names only groups of the sweep's
    model (found on the model's structure; its weights do not change its groups)."""
    from optimizers.schedules import parse_schedule
    technique = variant.techniques[0]
    doc = parse_schedule(dict(variant.settings)[technique].schedule)
    groups, _ = find_groups(structure_of(sweep), doc["technique"],
                            sweep.context(lambda p, f: None), sweep.spec.model)
    check_schedule(doc, groups, sweep.spec.model)


def structure_of(sweep):
    """The sweep's model as built, untrained (for what depends on its structure alone)."""
    from benchmarks.zoo.models import build_model
    data, spec = sweep.data, sweep.spec
    return build_model(spec.model, data.num_classes, data.in_channels, data.input_size,
                       sweep.allowed_models_dir, keep_head=sweep.keep_head).eval()
