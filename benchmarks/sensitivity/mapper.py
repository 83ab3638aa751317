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
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from benchmarks.measure.latency import measure_latency, pinned_threads
from benchmarks.report.records import LatencyStats
from benchmarks.report.stats import pack_bits, unpack_bits
from benchmarks.sensitivity import cells, diagnostics
from benchmarks.sensitivity.config import SensitivityConfig, is_pruning
from benchmarks.sensitivity.groups import Group, find_groups, structure_of
from benchmarks.sensitivity import profile
from benchmarks.sensitivity.profile import module_macs, module_params, module_work
from benchmarks.sensitivity.schedule import build_schedule
from benchmarks.sensitivity.subset import stratified_subset, to_confirm
from benchmarks.spec.cancel import Cancelled
from optimizers.errors import described

SCHEDULE_TRIES = 3  # knapsack runs on a shrunk budget before groups are let go
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
        shares = self.baseline.get("latency_shares") or {}
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
        if shares.get("groups") is not None:
            lines.append(f"latency shares: the groups {sum(shares['groups'].values()):.1%} + "
                         f"other (in no group: activations, functional ops) "
                         f"{shares['other']:.1%}, medians of {shares['rounds']} interleaved "
                         f"timed forwards")
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
    cache = cells.CellCache(sweep.cache)
    with pinned_threads(sweep.threads):
        # The groups first, on the model's structure (its weights do not change them): a
        # technique with none on this model is refused before the baseline trains.
        report("groups", 0, 0, f"finding the {config.technique} groups")
        groups, grouping = _groups(sweep, config.technique, cache)
        _check_stop(stop)
        report("baseline", 0, 0, "training or loading the baseline")
        baseline = sweep.load_baseline(None, stop)
        ctx = sweep.context(lambda p, f: report(f"cell: {p}", 0, 0, p), shared={})
        _check_stop(stop)
        base = _measure_baseline(sweep, baseline, groups, config, cache)
        _check_stop(stop)
        built = _Cells(sweep, base, groups, ctx, config, report, stop, on_row, cache)
        rows = built.screen()
        confirmed = built.confirm(rows)
    latency = base.extra["latency"]
    result = SensitivityMap(
        model=sweep.spec.model, dataset=sweep.spec.dataset, technique=config.technique,
        levels=list(config.cell_levels), rows=rows,
        baseline={"accuracy": sum(base.sets["full"][1]) / len(base.sets["full"][1]),
                  "n_test": len(base.sets["full"][1]), "latency_ms": latency,
                  "batch_size": sweep.spec.batch_size, "threads": sweep.threads,
                  "device": str(sweep.device), "from_cache": base.extra["from_cache"],
                  "latency_shares": {
                      "method": profile.METHOD, "rounds": base.extra["share_rounds"],
                      "groups": {g.root: cells.group_share(g, base) for g in groups},
                      "other": cells.other_share(groups, base)},
                  **base.extra.get("int8", {})},
        subset={"fraction": config.subset, "seed": config.subset_seed,
                "size": len(base.sets["subset"][0]), "of": len(base.sets["full"][0]),
                "indices": base.sets["subset"][0]},
        grouping={**grouping, "groups": len(groups)}, confirmed=confirmed,
        timing={"seconds": time.perf_counter() - t0, "cells": len(rows),
                "measured": built.measured, "from_cache": built.from_cache},
        config=config.to_dict())
    if config.max_drop_pts is not None:
        with pinned_threads(sweep.threads):
            result.schedule = _schedule(sweep, base, rows, config, built)
        result.timing["seconds"] = time.perf_counter() - t0
    return result


def _schedule(sweep, base: cells.Baseline, rows: list[dict], config: SensitivityConfig,
              built: "_Cells") -> dict:
    """The knapsack's schedule, its composition checked on the screening examples: the
    cells were measured one group at a time and their effects are not additive, so while the
    whole schedule loses more than the budget there, the knapsack is run again on a budget
    shrunk in proportion (at most SCHEDULE_TRIES times), then groups are let go, the noisiest
    output first, until it fits. The check travels in the schedule ("checked")."""
    latency = base.extra["latency"][config.objective]

    def solve(budget: float) -> dict:
        return build_schedule(rows, model=sweep.spec.model, technique=config.technique,
                              budget_pts=budget, baseline_ms=latency,
                              objective=config.objective, solver=config.solver,
                              shares=base.shares, dataset=sweep.spec.dataset,
                              finetune_epochs=config.finetune_epochs)

    budget, limit = config.max_drop_pts, config.max_drop_pts
    doc = solve(budget)
    for attempt in range(1, SCHEDULE_TRIES + 1):
        check = built.composed(doc)
        doc["checked"] = {**check, "budget_pts": budget, "tries": attempt}
        if "error" in check or -check["accuracy_change"] <= limit:
            return built.timed(_saving_fraction(doc))
        budget *= 0.9 * limit / -check["accuracy_change"]
        doc = solve(budget) if attempt < SCHEDULE_TRIES else doc
    by_noise = sorted((r for r in rows if doc["groups"].get(r["root"]) == r["level"]
                       and r["level"] > 0 and r.get("sqnr_db") is not None),
                      key=lambda r: r["sqnr_db"])
    for cell in by_noise:
        doc["groups"][cell["root"]] = 0.0 if is_pruning(config.technique) else 0
        check = built.composed(doc)
        doc["checked"] = {**check, "budget_pts": budget, "tries": doc["checked"]["tries"],
                          "let_go": doc["checked"].get("let_go", []) + [cell["root"]]}
        if "error" in check or -check["accuracy_change"] <= limit:
            break
    return built.timed(_saving_fraction(_repredict(doc, rows, latency, base.shares)))


def _saving_fraction(doc: dict) -> dict:
    """The predicted saving as a fraction of the baseline's latency too (what the measured
    one is set beside)."""
    predicted = doc["predicted"]
    predicted["saving"] = (predicted["saved_ms"] / predicted["baseline_ms"]
                           if predicted.get("baseline_ms") else None)
    return doc


def _repredict(doc: dict, rows: list[dict], latency: float, shares: dict) -> dict:
    """The prediction of a schedule whose levels were changed after the knapsack."""
    from benchmarks.sensitivity.schedule import composed_saving
    chosen = [r for r in rows if doc["groups"].get(r["root"]) == r["level"]]
    doc["predicted"].update(
        accuracy_change_pts=-sum(max(0.0, -(r["accuracy_change"] or 0.0)) for r in chosen)
        or 0.0, saved_ms=latency * composed_saving(rows, doc["groups"], shares))
    doc["predicted"][f"{doc['objective']}_ms"] = latency - doc["predicted"]["saved_ms"]
    return doc


def _groups(sweep, technique: str, cache: cells.CellCache) -> tuple[list[Group], dict]:
    """The technique's groups on the sweep's model, found once per model and data shape
    (Torch-Pruning's graph takes seconds on a large model) and then read from the cache."""
    key = (*sweep.base_key(sweep.spec.seed), "groups", technique)
    found = cache.get(key)
    if found is None:
        groups, grouping = find_groups(structure_of(sweep), technique,
                                       sweep.context(lambda p, f: None), sweep.spec.model)
        cache.put(key, {"groups": [asdict(g) for g in groups], "grouping": grouping})
        return groups, grouping
    return [Group(g["root"], tuple(g["modules"]), g["kind"], g["channels"],
                  tuple(g["observers"])) for g in found["groups"]], found["grouping"]


def _measure_baseline(sweep, baseline, groups: list[Group], config,
                      cache: cells.CellCache) -> cells.Baseline:
    """The baseline's correctness on the whole split (the subset's is a part of it), its
    outputs on the fixed batch, where its time and multiply-adds go, and its latency; all
    but the outputs measured once per baseline, device and threads, then cached."""
    data, device = sweep.data, sweep.device
    full = list(range(len(data.test)))
    key = (*sweep.base_key(sweep.spec.seed), "baseline", config.technique, str(device),
           sweep.threads, sweep.spec.batch_size, sweep.spec.min_time_s, profile.METHOD)
    measured = cache.get(key)
    if measured is None:
        measured = _baseline_figures(sweep, baseline, full, config)
        cache.put(key, measured)
        measured["from_cache"] = False
    else:
        measured["from_cache"] = True
    right = unpack_bits(measured["bits"], len(full))
    subset = stratified_subset(data.test.y.tolist(), config.subset, config.subset_seed)
    example = sweep.example[:diagnostics.diagnostic_batch(sweep.example)].to(device)
    members = sorted({m for g in groups for m in g.modules})
    base = cells.Baseline(
        model=baseline, device=device,
        sets={"full": (full, right), "subset": (subset, [right[i] for i in subset])},
        example=example, layers=diagnostics.capture(baseline, example, members),
        params=module_params(baseline), macs=measured["macs"], shares=measured["shares"],
        owners={m: sum(m in g.modules for g in groups) for m in members},
        work=measured["work"],
        extra={"latency": measured["latency"], "from_cache": measured["from_cache"],
               "share_rounds": measured["share_rounds"]})
    if "int8" in measured:
        base.extra["int8"] = measured["int8"]
        base.int8_gain = measured["int8"]["int8_gain"]
    return base


def _baseline_figures(sweep, baseline, full: list[int], config) -> dict:
    device, spec = sweep.device, sweep.spec
    tracker = measure_latency(baseline, sweep.example, device, min_runs=spec.min_runs,
                              min_time_s=spec.min_time_s, warmup=spec.warmup)
    stats = LatencyStats.from_samples(tracker.samples_ms, spec.batch_size)
    example = sweep.example[:1].to(device)
    timed = profile.module_times(baseline, sweep.example.to(device))
    out = {"bits": pack_bits(cells.score(baseline, device, sweep.data, full)),
           "shares": profile.shares_of(timed), "share_rounds": timed["rounds"],
           "macs": module_macs(baseline, example), "work": module_work(baseline, example),
           "latency": {"p50": stats.p50, "p90": stats.p90, "mean": stats.mean,
                       "noisy": stats.noisy}}
    if not is_pruning(config.technique):
        out["int8"] = _int8_gain(sweep, baseline, config)
    return out


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
                 config: SensitivityConfig, report: ProgressFn, stop, on_row: RowFn | None,
                 cache: cells.CellCache):
        self.sweep, self.base, self.groups, self.ctx = sweep, base, groups, ctx
        self.config, self.report, self.stop, self.on_row = config, report, stop, on_row
        self.cache = cache
        self.measured = self.from_cache = 0
        self._built = None  # (levels, model, device) of the last schedule built
        self.cells = [(g, level) for g in groups for level in config.cell_levels]

    def _key(self, group: Group, level: float, which: str) -> tuple:
        indices, _ = self.base.sets[which]
        digest = hashlib.sha256(json.dumps(indices).encode()).hexdigest()[:16]
        return (*self.sweep.base_key(self.sweep.spec.seed), self.config.technique, group.root,
                level, self.config.finetune_epochs, which, digest, cells.CALIBRATION_BATCHES,
                str(self.sweep.device))

    def measure(self, group: Group, level: float, which: str) -> dict:
        """The cell's measurement, from the cache or made now (kept by ``_row``, with its
        paired test)."""
        found = self.cache.get(self._key(group, level, which))
        if found is not None:
            self.from_cache += 1
            return found
        self.measured += 1
        try:
            model, device = cells.build_cell(self.base.model, self.config.technique, group,
                                             level, self.groups, self.ctx, self.config)
            return cells.measure(model, device, self.base, group, self.sweep.data, which)
        except Cancelled:
            raise
        except Exception as exc:  # one cell's failure never sinks the map
            return {"error": described(exc)}

    def _row(self, index: int, which: str) -> dict:
        group, level = self.cells[index]
        measured = self.measure(group, level, which)
        tests = dict(measured.get("tests") or {})
        out = cells.row(group, level, measured, self.base, which, self.config.confidence, tests)
        if "error" not in measured and tests != measured.get("tests"):
            # Kept with its paired test: a map from the cache computes neither again.
            self.cache.put(self._key(group, level, which), {**measured, "tests": tests})
        return out

    def composed(self, doc: dict) -> dict:
        """The whole schedule's change against the baseline on the screening examples
        (cached by its levels): what the knapsack's sum only predicts."""
        which = "full" if self.config.subset >= 1 else "subset"
        indices, base_right = self.base.sets[which]
        if not any(level > 0 for level in doc["groups"].values()):  # the baseline itself
            return {**cells.paired(base_right, base_right, self.config.confidence),
                    "on": which}
        levels = sorted(doc["groups"].items())
        digest = hashlib.sha256(json.dumps([levels, indices]).encode()).hexdigest()[:16]
        parts = (*self.sweep.base_key(self.sweep.spec.seed), self.config.technique,
                 "schedule", digest, self.config.finetune_epochs, str(self.sweep.device))
        found = self.cache.get(parts)
        if found is None:
            self.report("checking", 0, 0, "the whole schedule on the screening examples")
            try:
                model, device = self._scheduled(doc)
            except Exception as exc:  # said in the schedule; the map stands
                return {"error": described(exc), "on": which}
            found = {"bits": pack_bits(cells.score(model, device, self.sweep.data, indices))}
            self.cache.put(parts, found)
        right = unpack_bits(found["bits"], len(indices))
        return {**cells.paired(right, base_right, self.config.confidence), "on": which}

    def _scheduled(self, doc: dict):
        """(the whole schedule's model, its device), built once per levels: the accuracy
        check and the timing use the same model (the same fine-tuning as the cells)."""
        levels = json.dumps(sorted(doc["groups"].items()))
        if self._built is None or self._built[0] != levels:
            self._built = (levels, *cells.build_scheduled(self.base.model, doc, self.ctx,
                                                          self.config))
        return self._built[1], self._built[2]

    def timed(self, doc: dict) -> dict:
        """The schedule with its measured saving beside the predicted one ("measured"):
        the baseline and the schedule's model timed in ``config.verify_rounds`` interleaved
        rounds (their order alternating, so drift falls on both alike), the saving from the
        ratio of the rounds' medians with its bootstrap interval over the rounds."""
        rounds = self.config.verify_rounds
        if not rounds or not any(level > 0 for level in doc["groups"].values()):
            return doc
        self.report("timing", 0, 0, "the whole schedule against the baseline")
        try:
            model, device = self._scheduled(doc)
        except Exception as exc:  # said in the schedule; the map stands
            doc["measured"] = {"error": described(exc)}
            return doc
        doc["measured"] = measured_saving(self.base.model, self.sweep.device, model, device,
                                          self.sweep, self.config.objective, rounds)
        return doc

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


def measured_saving(baseline, base_device, model, device, sweep, objective: str,
                    rounds: int) -> dict:
    """{"saving", "saving_ci", "baseline_ms", "schedule_ms", "rounds", "objective"}: the
    fraction of the baseline's ``objective`` latency the schedule's model saves, timed in
    ``rounds`` interleaved rounds (ABBA order) on the sweep's batch."""
    from benchmarks.report.stats import bootstrap_ratio
    spec = sweep.spec
    per_round = max(spec.min_time_s / 4, 0.05)
    timed: dict[str, list[float]] = {"base": [], "schedule": []}
    pair = (("base", baseline, base_device), ("schedule", model, device))
    for r in range(rounds):
        for name, m, dev in (pair if r % 2 == 0 else pair[::-1]):
            tracker = measure_latency(m, sweep.example, dev, min_runs=spec.min_runs,
                                      min_time_s=per_round, warmup=spec.warmup)
            stats = LatencyStats.from_samples(tracker.samples_ms, spec.batch_size)
            timed[name].append(getattr(stats, objective))
    boot = bootstrap_ratio([[x] for x in timed["base"]], [[x] for x in timed["schedule"]])
    ratio = boot["ratio"]
    return {"saving": 1.0 - 1.0 / ratio, "objective": objective, "rounds": rounds,
            "saving_ci": None if boot["ci"] is None else [1.0 - 1.0 / c for c in boot["ci"]],
            "baseline_ms": statistics.median(timed["base"]),
            "schedule_ms": statistics.median(timed["schedule"]),
            "round_baseline_ms": timed["base"], "round_schedule_ms": timed["schedule"]}


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
