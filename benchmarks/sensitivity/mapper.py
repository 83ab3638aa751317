"""A sensitivity map, built: every group of a technique at every level, each cell screened on
a fixed stratified subset of the evaluation split, the most and least sensitive confirmed on
all of it, and, given a drop budget, the schedule that saves the most latency within it.

``build_map(sweep, config)`` takes a prepared sweep (``benchmarks.run.runner.PreparedSweep``
with only its baseline: the data, the baseline's weights from the cache, the context the
techniques get) and reads nothing else; the callers (the ``sensitivity`` command, the
queue's worker, the perf tool) prepare it, record the rows and write the files. A cancel is
looked for between cells, in one place (``_check_stop``), as every job kind does.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from benchmarks.measure.latency import measure_latency, pinned_threads
from benchmarks.report.results import LatencyStats
from benchmarks.sensitivity import cells, diagnostics
from benchmarks.sensitivity.config import SensitivityConfig, is_pruning
from benchmarks.sensitivity.groups import Group, find_groups, structure_of
from benchmarks.sensitivity.profile import module_macs, module_params, module_shares
from benchmarks.sensitivity.schedule import build_schedule
from benchmarks.sensitivity.subset import stratified_subset, to_confirm
from benchmarks.spec.cancel import Cancelled
from optimizers.errors import described

# (phase, cells done, cells in all, message) -> None
ProgressFn = Callable[[str, int, int, str], None]
RowFn = Callable[[int, dict], None]


@dataclass
class SensitivityMap:
    model: str
    dataset: str
    technique: str
    levels: list[float]
    rows: list[dict]
    baseline: dict
    subset: dict
    grouping: dict
    confirmed: list[str] = field(default_factory=list)
    timing: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    schedule: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def document(self, environment: dict) -> dict:
        """The JSON file: schema 1, the environment card, and the map."""
        return {"schema": 1, "environment": environment, "sensitivity": self.to_dict()}

    def table(self) -> str:
        """The rows as text, most sensitive first."""
        lines = [f"{'group root':<28} {'level':>5} {'Δ acc (pts)':>11} {'95% interval':>17} "
                 f"{'p':>7} {'share':>6} {'SQNR dB':>8}  on"]
        for r in sorted(self.rows, key=lambda r: (r.get("accuracy_change") is None,
                                                  r.get("accuracy_change") or 0)):
            if r.get("error"):
                lines.append(f"{r['root']:<28} {r['level']:>5g}  failed: {r['error']}")
                continue
            low, high = r["accuracy_change_ci"]
            sqnr = "-" if r["sqnr_db"] is None else f"{r['sqnr_db']:.1f}"
            lines.append(f"{r['root'][:28]:<28} {r['level']:>5g} {r['accuracy_change']:>+11.2f} "
                         f"[{low:+6.2f}, {high:+6.2f}] {r['p_value']:>7.3f} "
                         f"{r['latency_share']:>6.1%} {sqnr:>8}  {r['evaluated_on']}")
        return "\n".join(lines)


def _check_stop(stop: Callable[[], bool]) -> None:
    """The one place a map looks for a cancel (between cells, never inside one)."""
    if stop():
        raise Cancelled()


def build_map(sweep, config: SensitivityConfig, *, on_progress: ProgressFn | None = None,
              should_stop: Callable[[], bool] | None = None,
              on_row: RowFn | None = None) -> SensitivityMap:
    """The map of ``config.technique`` on the sweep's baseline. ValueError for what the
    user must change (no labels, no groups); Cancelled when ``should_stop`` says so."""
    stop = should_stop or (lambda: False)
    report = on_progress or (lambda *a: None)
    if not sweep.data.labelled:
        raise ValueError(f"a sensitivity map compares accuracies, and {sweep.spec.dataset} "
                         f"has no labels; use a labelled data set")
    t0 = time.perf_counter()
    with pinned_threads(sweep.threads):
        # The groups first, on the model's structure (its weights do not change them): a
        # technique with none on this model is refused before the baseline trains.
        report("groups", 0, 0, f"finding the {config.technique} groups")
        groups, grouping = find_groups(structure_of(sweep), config.technique,
                                       sweep.context(lambda p, f: None), sweep.spec.model)
        _check_stop(stop)
        report("baseline", 0, 0, "training or loading the baseline")
        baseline = sweep.load_baseline(None, stop)
        ctx = sweep.context(lambda p, f: report(f"cell: {p}", 0, 0, p), shared={})
        _check_stop(stop)
        base = _measure_baseline(sweep, baseline, groups, config)
        _check_stop(stop)
        built = _Cells(sweep, base, groups, ctx, config, report, stop, on_row)
        rows = built.screen()
        confirmed = built.confirm(rows)
    latency = base.extra["latency"]
    result = SensitivityMap(
        model=sweep.spec.model, dataset=sweep.spec.dataset, technique=config.technique,
        levels=list(config.cell_levels), rows=rows,
        baseline={"accuracy": sum(base.sets["full"][1]) / len(base.sets["full"][1]),
                  "n_test": len(base.sets["full"][1]), "latency_ms": latency,
                  "batch_size": sweep.spec.batch_size, "threads": sweep.threads,
                  "device": str(sweep.device), **base.extra.get("int8", {})},
        subset={"fraction": config.subset, "seed": config.subset_seed,
                "size": len(base.sets["subset"][0]), "of": len(base.sets["full"][0]),
                "indices": base.sets["subset"][0]},
        grouping={**grouping, "groups": len(groups)}, confirmed=confirmed,
        timing={"seconds": time.perf_counter() - t0, "cells": len(rows),
                "measured": built.cache.misses, "from_cache": built.cache.hits},
        config=config.to_dict())
    if config.max_drop_pts is not None:
        result.schedule = build_schedule(
            rows, model=sweep.spec.model, technique=config.technique,
            budget_pts=config.max_drop_pts, baseline_ms=latency[config.objective],
            objective=config.objective, solver=config.solver, shares=base.shares,
            dataset=sweep.spec.dataset)
    return result


def _measure_baseline(sweep, baseline, groups: list[Group], config) -> cells.Baseline:
    """The baseline's correctness on the whole split (the subset's is a part of it), its
    outputs on the fixed batch, where its time and multiply-adds go, and its latency."""
    data, device, spec = sweep.data, sweep.device, sweep.spec
    full = list(range(len(data.test)))
    right = cells.score(baseline, device, data, full)
    subset = stratified_subset(data.test.y.tolist(), config.subset, config.subset_seed)
    example = sweep.example[:diagnostics.DIAGNOSTIC_BATCH].to(device)
    members = sorted({m for g in groups for m in g.modules})
    layers = diagnostics.capture(baseline, example, members)
    shares = module_shares(baseline, sweep.example.to(device))
    base = cells.Baseline(
        model=baseline, device=device,
        sets={"full": (full, right), "subset": (subset, [right[i] for i in subset])},
        example=example, layers=layers,
        params=module_params(baseline), macs=module_macs(baseline, example[:1]),
        shares=shares, owners={m: sum(m in g.modules for g in groups) for m in members})
    tracker = measure_latency(baseline, sweep.example, device, min_runs=spec.min_runs,
                              min_time_s=spec.min_time_s, warmup=spec.warmup)
    stats = LatencyStats.from_samples(tracker.samples_ms, spec.batch_size)
    base.extra["latency"] = {"p50": stats.p50, "p90": stats.p90, "mean": stats.mean,
                             "noisy": stats.noisy}
    if not is_pruning(config.technique):
        base.extra["int8"] = _int8_gain(sweep, baseline, config)
        base.int8_gain = base.extra["int8"]["int8_gain"]
    return base


def _int8_gain(sweep, baseline, config) -> dict:
    """What quantizing the whole model saves, on the CPU where INT8's kernels run: the
    fraction of the float model's CPU time a quantized group is predicted to save, times its
    share."""
    from optimizers import quantization
    spec = sweep.spec
    cpu = torch.device("cpu")
    float_model = copy.deepcopy(baseline).to(cpu).eval()
    quantization.select_engine()
    if config.technique == "int8.dynamic":
        quantized = torch.ao.quantization.quantize_dynamic(
            copy.deepcopy(float_model), set(quantization.DYNAMIC_TYPES),
            dtype=torch.qint8)
    else:
        ctx = sweep.context(lambda p, f: None, shared={})
        quantized = quantization.static_fx(copy.deepcopy(float_model),
                                           ctx.calibration(cells.CALIBRATION_BATCHES))
    timed = {}
    for name, model in (("float", float_model), ("int8", quantized)):
        tracker = measure_latency(model, sweep.example, cpu, min_runs=spec.min_runs,
                                  min_time_s=spec.min_time_s, warmup=spec.warmup)
        timed[name] = LatencyStats.from_samples(tracker.samples_ms, spec.batch_size).p50
    gain = 1.0 - timed["int8"] / timed["float"] if timed["float"] else 0.0
    return {"cpu_float_p50_ms": timed["float"], "cpu_int8_p50_ms": timed["int8"],
            "int8_gain": gain}


class _Cells:
    """The map's cells: screened, then the extremes confirmed, each measured once per key."""

    def __init__(self, sweep, base: cells.Baseline, groups: list[Group], ctx,
                 config: SensitivityConfig, report: ProgressFn, stop, on_row: RowFn | None):
        self.sweep, self.base, self.groups, self.ctx = sweep, base, groups, ctx
        self.config, self.report, self.stop, self.on_row = config, report, stop, on_row
        self.cache = cells.CellCache(sweep.cache)
        self.cells = [(g, level) for g in groups for level in config.cell_levels]

    def _key(self, group: Group, level: float, which: str) -> tuple:
        indices, _ = self.base.sets[which]
        digest = hashlib.sha256(json.dumps(indices).encode()).hexdigest()[:16]
        return (*self.sweep.base_key(self.sweep.spec.seed), self.config.technique, group.root,
                level, self.config.finetune_epochs, which, digest, cells.CALIBRATION_BATCHES)

    def measure(self, group: Group, level: float, which: str) -> dict:
        parts = self._key(group, level, which)
        found = self.cache.get(parts)
        if found is not None:
            return found
        try:
            model, device = cells.build_cell(self.base.model, self.config.technique, group,
                                             level, self.groups, self.ctx, self.config)
            measured = cells.measure(model, device, self.base, group, self.sweep.data, which)
        except Cancelled:
            raise
        except Exception as exc:  # one cell's failure never sinks the map
            return {"error": described(exc)}
        self.cache.put(parts, measured)
        return measured

    def _row(self, index: int, which: str) -> dict:
        group, level = self.cells[index]
        measured = self.measure(group, level, which)
        return cells.row(group, level, measured, self.base, which, self.config.confidence)

    def screen(self) -> list[dict]:
        which = "full" if self.config.subset >= 1 else "subset"
        rows = []
        for index, (group, level) in enumerate(self.cells):
            _check_stop(self.stop)
            self.report("screening", index, len(self.cells),
                        f"cell {index + 1}/{len(self.cells)}: {group.root} at {level:g}")
            rows.append(self._row(index, which))
            if self.on_row is not None:
                self.on_row(index, rows[-1])
        return rows

    def confirm(self, rows: list[dict]) -> list[str]:
        """The k most and least sensitive cells measured again on the whole split (their
        rows replaced); with a subset of the whole split, nothing to confirm."""
        if self.config.subset >= 1:
            return []
        picked = to_confirm(rows, self.config.confirm)
        for done, index in enumerate(picked):
            _check_stop(self.stop)
            self.report("confirming", done, len(picked),
                        f"confirming {rows[index]['name']} on the whole split")
            rows[index] = self._row(index, "full")
            if self.on_row is not None:
                self.on_row(index, rows[index])
        return [rows[i]["name"] for i in picked]


def summary(result: SensitivityMap) -> dict:
    """What a stored map keeps beside its rows (the rows are the run's variants)."""
    out = result.to_dict()
    out.pop("rows")
    return out


def record_map(sweep, config: SensitivityConfig, recorder, *,
               on_progress: ProgressFn | None = None,
               should_stop: Callable[[], bool] | None = None) -> SensitivityMap:
    """``build_map`` with each row stored as it is measured (``recorder``: the store's
    ``RunRecorder``) and the map's summary in the run's environment card at the end."""
    result = build_map(sweep, config, on_progress=on_progress, should_stop=should_stop,
                       on_row=lambda index, row: recorder.add(row, index))
    recorder.set_environment({**sweep.environment, "sensitivity": summary(result)})
    return result
