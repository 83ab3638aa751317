"""One cell of a sensitivity map: one group at one level, everything else as the baseline.

A cell is the technique applied with a one-group schedule (channel and L1 pruning through
``optimizers.pruning``; INT8 with only that group's op quantized), so a map measures exactly
what a schedule would apply. Its row: the accuracy change against the baseline on the same
examples, from per-example correctness, with its interval and p-value from one test
(``stats.paired_difference``, as every other comparison: exact where discordant pairs are
few, Tango's score test otherwise); the group's
parameters, multiply-adds and share of the baseline's latency; and the SQNR of the model's
output, and of the group's own output, against the float model, to explain the change.

Measurements are cached (``CellCache``) under a key of the weights cache's making: the
baseline's identity, the cell and the examples it was scored on. A second map of the same
model and levels scores nothing again.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

from benchmarks.report import stats
from benchmarks.sensitivity import diagnostics
from benchmarks.sensitivity.config import SensitivityConfig, is_pruning
from benchmarks.sensitivity.groups import Group, cell_schedule
from benchmarks.spec.folders import private_folder
from optimizers.training import correctness

CELL_VERSION = 2  # bump when what a cell measures changes: cached rows are then redone
CALIBRATION_BATCHES = 8  # as static INT8's default (Int8Settings)


@dataclass
class Baseline:
    """What every cell is compared with, measured once per map."""
    model: torch.nn.Module
    device: torch.device
    sets: dict                  # "subset" / "full" -> (indices, baseline correctness)
    example: torch.Tensor       # the fixed batch outputs are compared on
    layers: diagnostics.Capture  # the baseline's outputs on it, layer by layer
    params: dict
    macs: dict
    shares: dict
    # module -> how many groups hold it (a layer whose input channels one group prunes and
    # whose output channels another does): its time is shared out between them.
    owners: dict = field(default_factory=dict)
    int8_gain: float = 0.0      # INT8: the fraction of a group's time quantizing saves
    # the elements per sample each leaf without weights (a ReLU) outputs: a cell that
    # shrinks them saves that part of their time too
    work: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)


def build_cell(baseline: torch.nn.Module, technique: str, group: Group, level: float,
               groups: list[Group], ctx, config: SensitivityConfig):
    """(the cell's model, the device it runs on)."""
    schedule = json.dumps(cell_schedule(technique, group, level, groups))
    if is_pruning(technique):
        from optimizers import pruning
        from optimizers.settings import PruneSettings
        settings = PruneSettings(0.0, technique.split(".", 1)[1], config.finetune_epochs,
                                 schedule=schedule)
        return pruning.apply(baseline, settings, ctx).model, ctx.device
    from optimizers import quantization
    cpu = torch.device("cpu")
    quantization.select_engine()
    model = copy.deepcopy(baseline).to(cpu).eval()
    if technique == "int8.dynamic":
        return torch.ao.quantization.quantize_dynamic(model, {group.root},
                                                      dtype=torch.qint8), cpu
    calibration = ctx.calibration(CALIBRATION_BATCHES)
    mapping = quantization.qconfig_mapping(only=[group.root])
    return quantization.static_fx(model, calibration, mapping), cpu


def build_scheduled(baseline: torch.nn.Module, schedule: dict, ctx, config: SensitivityConfig):
    """(the model a whole schedule makes, the device it runs on): the technique's own apply
    with the schedule as its setting, as ``run --schedule`` applies it (fine-tuned as the
    map's cells are)."""
    from optimizers.schedules import SCHEDULE_TECHNIQUES
    technique, _, value = SCHEDULE_TECHNIQUES[schedule["technique"]]
    text = json.dumps({"technique": schedule["technique"], "groups": schedule["groups"]})
    if technique == "prune":
        from optimizers import pruning
        from optimizers.settings import PruneSettings
        out = pruning.apply(baseline, PruneSettings(0.0, value, config.finetune_epochs,
                                                    schedule=text), ctx)
    else:
        from optimizers import quantization
        from optimizers.settings import Int8Settings
        out = quantization.apply(baseline, Int8Settings(value, schedule=text), ctx)
    return out.model, out.device or ctx.device


def score(model, device, data, indices: list[int], batch: int = 256) -> list[bool]:
    """Per-example correctness of ``model`` on the test split's ``indices``, in order."""
    idx = torch.as_tensor(indices, dtype=torch.long)
    return correctness(model, ((data.test.x[idx[i:i + batch]], data.test.y[idx[i:i + batch]])
                               for i in range(0, len(idx), batch)), device)


def measure(model, device, base: Baseline, group: Group, data, which: str) -> dict:
    """What is cached of a cell: its correctness on the ``which`` set, its outputs' SQNR,
    its group's parameters and multiply-adds after the technique."""
    from benchmarks.sensitivity.profile import module_macs, module_params, module_work
    indices, _ = base.sets[which]
    right = score(model, device, data, indices)
    example = base.example.to(device)
    mine = diagnostics.capture(model, example, list(group.modules))
    macs = module_macs(model, example[:1]) if is_pruning(group.kind) else base.macs
    params = module_params(model) if is_pruning(group.kind) else base.params
    work = module_work(model, example[:1]) if is_pruning(group.kind) else base.work
    return {"bits": stats.pack_bits(right), "n": len(right),
            "sqnr_db": diagnostics._finite(diagnostics.sqnr_db(base.layers.output,
                                                               mine.output)),
            "group_sqnr_db": _group_sqnr(base, group, mine),
            "params_after": sum(params.get(m, 0) for m in group.modules),
            "macs_after": {m: macs.get(m, 0) for m in group.modules if m in base.macs},
            "work_after": {m: work[m] for m in base.work if m in work
                           and work[m] != base.work[m]},
            "channels_kept": _width(model, group.root) if group.channels else None}


def _width(model, name: str) -> int | None:
    """How many output channels (features) the layer ``name`` has now."""
    try:
        layer = model.get_submodule(name)
    except AttributeError:
        return None
    return getattr(layer, "out_channels", getattr(layer, "out_features", None))


def _group_sqnr(base: Baseline, group: Group, mine: diagnostics.Capture) -> float | None:
    """The SQNR of the group's own output: the last of its layers, in the order the forward
    runs them, whose output keeps its shape (a pruned layer's own output has fewer channels;
    the layer reading them does not), against the baseline's (for an INT8 op, the baseline's
    output after the batch norm and ReLU it folds in)."""
    for name in reversed([m for m in base.layers.order if m in group.modules]):
        ref, got = base.layers.reference(name, mine), mine.outputs.get(name)
        if ref is not None and got is not None and ref.shape == got.shape:
            return diagnostics._finite(diagnostics.sqnr_db(ref, got))
    return None


def paired(right: list[bool], base_right: list[bool], confidence: float) -> dict:
    """A model's change against the baseline on the same examples, in points, with its
    interval and p-value from one test (``stats.paired_difference``: they never disagree)."""
    only_mine, only_base = stats.discordant(right, base_right)
    n = len(right)
    test = stats.paired_difference(only_mine, only_base, n, confidence)
    return {"accuracy_change": test["difference_pts"], "accuracy_change_ci": test["ci_pts"],
            "p_value": test["p_value"], "test": test["test"], "n": n}


def row(group: Group, level: float, measured: dict, base: Baseline, which: str,
        confidence: float, tests: dict | None = None) -> dict:
    """The map's row of a cell (the contract's shape, docs/ARCHITECTURE.md; accuracy changes
    in points). ``tests``: paired tests already computed (``stats.paired_key``), read and
    added to, so a map from the cache does not compute its exact intervals again."""
    _, base_right = base.sets[which]
    out = {"name": f"{group.root}@{level:g}", **group.to_dict(), "level": level,
           "evaluated_on": which, "error": measured.get("error")}
    params = sum(base.params.get(m, 0) for m in group.modules)
    macs = sum(base.macs.get(m, 0) for m in group.modules)
    out.update(params=params, macs=macs, latency_share=group_share(group, base))
    if out["error"] is not None:
        return {**out, "accuracy_change": None, "accuracy_change_ci": None, "p_value": None,
                "sqnr_db": None}
    n = measured["n"]
    right = stats.unpack_bits(measured["bits"], n)
    only_cell, only_base = stats.discordant(right, base_right)
    # The interval and the p-value from one test: exact where discordant pairs are few.
    tests = {} if tests is None else tests
    key = stats.paired_key(only_cell, only_base, n, confidence)
    test = tests.get(key) or stats.paired_difference(only_cell, only_base, n, confidence)
    tests[key] = test
    after = measured["macs_after"]
    removed = {m: 1.0 - after[m] / base.macs[m] for m in after if base.macs.get(m)}
    # The leaves without weights the cell shrinks (a ReLU after a pruned convolution).
    removed.update({m: 1.0 - w / base.work[m] for m, w in
                    (measured.get("work_after") or {}).items() if base.work.get(m)})
    out.update(
        accuracy=sum(right) / n, n=n, b=only_cell, c=only_base,
        accuracy_change=test["difference_pts"], accuracy_change_ci=test["ci_pts"],
        p_value=test["p_value"], test=test["test"],
        within_noise=test["p_value"] >= stats.ALPHA,
        sqnr_db=measured["sqnr_db"], group_sqnr_db=measured["group_sqnr_db"],
        params_after=measured["params_after"], macs_after=sum(after.values()),
        macs_removed=1.0 - sum(after.values()) / macs if macs else 0.0,
        macs_removed_by_module={m: round(f, 6) for m, f in removed.items()
                                if m in group.modules},
        work_removed_by_module={m: round(f, 6) for m, f in removed.items()},
        channels_kept=measured.get("channels_kept"),
        saving=_saving(group, removed, base))
    return out


def group_share(group: Group, base: Baseline) -> float:
    """The group's part of the baseline's latency: its modules' shares, a module several
    groups hold split evenly between them, so the groups' parts and the time no group holds
    (``other_share``) add to one."""
    return sum(base.shares.get(m, 0.0) / max(base.owners.get(m, 1), 1)
               for m in group.modules)


def other_share(groups: list[Group], base: Baseline) -> float:
    """The part of the baseline's latency no group holds: the leaves of no group (ReLUs,
    pooling) and what no leaf ran."""
    return max(0.0, 1.0 - sum(group_share(g, base) for g in groups))


def _saving(group: Group, removed: dict, base: Baseline) -> float:
    """The fraction of the baseline's latency this cell alone is predicted to save: for
    pruning each layer's share times the fraction of its multiply-adds (for a leaf without
    weights, of its output) removed, a layer two groups hold counted half to each (so no two
    cells claim the same time); for INT8 the group's share times what quantizing saves."""
    if not is_pruning(group.kind):
        return group_share(group, base) * base.int8_gain
    return sum(base.shares.get(m, 0.0) / max(base.owners.get(m, 1), 1) * f
               for m, f in removed.items())


class CellCache:
    """Cell measurements as JSON files beside the weights cache's entries, keyed by its key
    function (library versions and the training code's version included). ``None`` as the
    weights cache (or a disabled one) keeps nothing."""

    def __init__(self, weights_cache):
        directory = getattr(weights_cache, "directory", None)
        self.enabled = bool(directory) and getattr(weights_cache, "enabled", False)
        self.folder = Path(directory) / "sensitivity" if self.enabled else None
        self.weights = weights_cache
        self.hits = self.misses = 0

    def key(self, parts: tuple) -> str:
        return self.weights.key(("sensitivity-cell", CELL_VERSION, *parts))

    def get(self, parts: tuple) -> dict | None:
        if not self.enabled:
            return None
        path = self.folder / f"{self.key(parts)}.json"
        try:
            found = json.loads(path.read_text())
        except (OSError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        return found

    def put(self, parts: tuple, value: dict) -> None:
        if not self.enabled:
            return
        private_folder(self.folder)
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(value, f)
        os.replace(tmp, self.folder / f"{self.key(parts)}.json")  # whole or not at all
