"""Trials measured through the existing executors, a wave at a time.

A wave is an ordinary sweep: the baseline and a few trials, built where the sweep's executor
builds (here, in turn; this machine's idle GPUs, ``executors.pool``; Ray tasks,
``executors.ray_executor``) and timed together on one node, in interleaved rounds
(``run.rounds``), so each trial's ratio is against the baseline timed in the same rounds. The
prepared sweep (data loaded, baseline trained once, weights cache) is reused from wave to
wave; only its list of variants changes.
"""

from __future__ import annotations

import dataclasses
import time

from benchmarks.report.records import Cost, Timing
from benchmarks.report.results import VariantResult
from benchmarks.spec.runtimes import EAGER
from benchmarks.spec.variant import BASELINE, VariantSpec


def reference_of(base: VariantResult) -> dict:
    """A wave's baseline as much as a ratio against it needs (its timing rounds, the statistics
    of all its samples, size and memory), without its samples: what the recommendation keeps
    per wave, so a ratio taken in the search can be recomputed from the stored JSON."""
    lat = base.timing.latency
    rounds = list(base.timing.round_p50_ms)
    ref = VariantResult(
        name=base.name, device=base.device,
        timing=Timing(batch_size=base.timing.batch_size, round_p50_ms=rounds,
                      latency_samples_ms=rounds or ([lat.p50] if lat else [])),
        cost=Cost(size_bytes=base.cost.size_bytes, peak_memory_bytes=base.cost.peak_memory_bytes))
    if lat is not None:
        ref.timing.sample_stats = {"latency_samples_ms": dataclasses.asdict(lat)}
    return ref.to_dict()


class Waves:
    def __init__(self, sweep, spec, stop, on_progress=None):
        self.sweep = sweep            # a PreparedSweep, or a RaySweep around one
        self.spec = spec              # the sweep's spec; its variants are replaced per wave
        self.stop = stop
        self.on_progress = on_progress
        self.count = 0
        self.measure_s: list[float] = []  # per variant, what a wave spends but training
        # A sweep run here remembers, wave to wave, what it measured of each variant (the
        # baseline's scores, a candidate's for its final timing) and the work its techniques
        # share (the teacher's logits): ``PreparedSweep.known``. A Ray sweep (no ``known``)
        # builds and scores on its nodes, each wave whole.
        self.local = hasattr(sweep, "known")
        if self.local:
            sweep.known, sweep.shared = {}, {}

    def _set(self, spec) -> None:
        self.sweep.spec = spec
        prepared = getattr(self.sweep, "prepared", None)
        if prepared is not None:
            prepared.spec = spec

    def measure(self, variants: list[VariantSpec], rounds: int, stop=None,
                runtimes: list[str] | None = None
                ) -> tuple[VariantResult | None, list[VariantResult | None], bool]:
        """(the wave's baseline, each trial's result in order, whether it was cut short); a
        result is None where the wave stopped before measuring it, or it was not timed.
        ``stop``: the check this wave obeys (the final timing's ignores the budget).
        ``runtimes``: each trial's runtime (eager where not given). A trial under another
        runtime is a runtime cell of its variant (``run.cells``), built only for the trials
        that ask for it (``cell_plan``), timed in the same rounds; its result is the cell's:
        that runtime's accuracy, per-example bits and timing."""
        runtimes = list(runtimes or ["eager"] * len(variants))
        # A recipe asked under two runtimes in one wave is built once.
        unique: dict[str, VariantSpec] = {}
        for v in variants:
            unique.setdefault(v.name, v)
        index = {name: i + 1 for i, name in enumerate(unique)}
        plan: dict[int, set[str]] = {}
        for v, runtime in zip(variants, runtimes):
            if runtime != EAGER:
                plan.setdefault(index[v.name], set()).add(runtime)
        others = sorted({r for names in plan.values() for r in names})
        spec = dataclasses.replace(self.spec, variants=(BASELINE, *unique.values()),
                                   timing_rounds=rounds, runtimes=(EAGER, *others))
        self._set(spec)
        self.sweep.cell_plan = plan
        self.sweep.cancelled = False
        t0 = time.perf_counter()
        try:
            results = list(self.sweep.run(self.on_progress,
                                          self.stop if stop is None else stop))
        finally:
            self.sweep.cell_plan = None
        self.count += 1
        cut = bool(self.sweep.cancelled)
        by_index = dict(enumerate(results[:len(unique) + 1]))
        cells: dict = {}
        for r in results[len(unique) + 1:]:  # a runtime's first cell: the wave's batch, threads
            cells.setdefault(((r.runtime or {}).get("variant"), (r.runtime or {}).get("name")), r)
        base = by_index.get(0)
        if self.local and not cut:
            for v, r in zip((BASELINE, *unique.values()), results):
                if r is not None and r.ok and r.scores.correct_bits and r.runtime is None:
                    self.sweep.known[v.stable_hash()] = r
        trials = [by_index.get(index[v.name]) if runtime == EAGER
                  else cells.get((v.name, runtime)) for v, runtime in zip(variants, runtimes)]
        if cut:  # a variant whose timing the cancel cut off has no ratio: not measured
            trials = [r if r is not None and r.timing.round_p50_ms else None for r in trials]
            if base is not None and not base.timing.round_p50_ms:
                base = None
        if base is not None:
            spent = time.perf_counter() - t0
            trained = sum((r.provenance.phase_s or {}).get("build", 0.0) for r in results
                          if r is not None and r.techniques)
            own = base.provenance.phase_s.get("build", 0.0)
            self.measure_s.append(max(0.0, spent - trained - own) / (len(results) or 1))
        return base, trials, cut

    def per_variant_s(self) -> float:
        """What measuring one variant (accuracy, memory, size, timing) has cost per wave."""
        if not self.measure_s:
            return 0.0
        ordered = sorted(self.measure_s)
        return ordered[len(ordered) // 2]
