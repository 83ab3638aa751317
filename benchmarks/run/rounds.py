"""When each variant is timed: together, in interleaved round-robin rounds, or alone.

Every built variant stays resident and is timed in ``timing_rounds`` rounds, each visit a
slice of the budget, the starting variant rotating each round, so drift of a noisy host (a
neighbour's job, a thermal limit, a frequency change) hits every variant alike; every p50 is
taken over all of a variant's samples. A variant that does not fit in memory beside the others
is timed alone right after its build, and says so. In a CUDA sweep whose INT8 variants run on
the CPU, a CPU copy of the baseline is timed in the same rounds, as their reference (no latency
ratio across devices).
"""

from __future__ import annotations

import copy
import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from benchmarks.measure.cores import current_claim
from benchmarks.measure.latency import measure_latency
from benchmarks.report.results import VariantResult
from benchmarks.run.phases import Report
from benchmarks.spec.cancel import Cancelled
from benchmarks.spec.sweep import SweepSpec
from optimizers.errors import described

__all__ = ["Built", "release_memory", "time_alone", "time_interleaved", "visit"]


@dataclass
class Built:
    """A variant built and measured but for its latency."""
    index: int
    result: VariantResult
    model: nn.Module | None = None
    device: torch.device | None = None
    autocast_dtype: torch.dtype | None = None
    example: torch.Tensor | None = None  # the timed batch, in the variant's memory format
    samples: list[float] = field(default_factory=list)
    host: list[float] = field(default_factory=list)
    rounds: list[float] = field(default_factory=list)  # each visit's p50
    visits: int = 0
    calls: int = 0          # timed calls, every visit's
    window_s: float = 0.0   # the wall time of the visits' timed loops
    # Revisits' first calls against their visit's median (warm-up on a revisit: see ``warmup``)
    penalties: list[float] = field(default_factory=list)
    warm_revisits: bool = True
    flops_hint: object = None  # the technique's own FLOP count, where it knows better
    # The intra-op threads it is timed on (None: the sweep's pinned count). A runtime cell's
    # own pool (ONNX Runtime's, OpenVINO's) was sized when it was prepared.
    threads: int | None = None
    position: int | None = None  # a runtime cell's row in the run (after the variants')

    def autocast(self):
        from optimizers.precision import autocast
        return autocast(self.device.type, self.autocast_dtype)



def release_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def visit(b: Built, runs: int, seconds: float, warmup: int, nearest: bool = False) -> None:
    """One visit of a variant: at least ``runs`` calls and about ``seconds`` of samples
    (``nearest``: ``LatencyTracker.nearest``)."""
    before = torch.get_num_threads()
    if b.threads is not None:
        torch.set_num_threads(b.threads)
    try:
        tracker = measure_latency(b.model, b.example, b.device, autocast=b.autocast(),
                                  min_runs=runs, min_time_s=seconds, warmup=warmup,
                                  nearest=nearest)
    finally:
        torch.set_num_threads(before)
    if b.visits and tracker.warmup_ms and tracker.samples_ms:
        b.penalties.append(tracker.warmup_ms[0] / statistics.median(tracker.samples_ms) - 1)
    b.samples.extend(tracker.samples_ms)
    b.host.extend(tracker.host_samples_ms)
    if tracker.samples_ms:
        b.rounds.append(statistics.median(tracker.samples_ms))
    b.visits += 1
    b.calls += len(tracker.samples_ms)
    b.window_s += tracker.window_ms / 1e3
    phases = b.result.provenance.phase_s
    phases["latency"] = phases.get("latency", 0.0) + tracker.wall_s


def _finish(b: Built, timing: dict) -> None:
    b.result.timing.keep_samples("latency_samples_ms", b.samples)
    if b.device is not None and b.device.type == "cuda":
        b.result.timing.keep_samples("host_samples_ms", b.host)
    b.result.timing.round_p50_ms = [round(x, 6) for x in b.rounds]
    if b.calls:
        b.result.timing.timed_calls, b.result.timing.timed_window_s = b.calls, round(b.window_s, 6)
    claim = current_claim()
    # The cores it ran on, a shared one named: a profile's process or a cluster's node
    # claims its own, and its rows carry them back.
    b.result.timing.how = {**timing, "pinning": claim} if claim else timing
    b.model = None


def time_alone(b: Built, spec: SweepSpec, report: Report, for_memory: bool) -> None:
    """Sequential timing right after the build: what does not fit beside the others."""
    report(b.result.name, b.index, "latency", 0.0)
    started = time.time()
    try:
        visit(b, spec.min_runs, spec.min_time_s, spec.warmup)
    except Exception as exc:
        b.result.error = f"latency failed: {described(exc)}"
    reason = ("the variants do not fit in memory together" if for_memory
              else "sequential timing was asked for")
    _finish(b, {"method": "sequential", "rounds": 1, "reason": reason,
                "window": [round(started, 3), round(time.time(), 3)]})
    release_memory()


def time_interleaved(built: list[Built], spec: SweepSpec, device: torch.device,
                     example: torch.Tensor, report: Report, stop: Callable[[], bool],
                     after_rounds: Callable[[list[Built]], None] | None = None) -> None:
    """Time the resident variants of ``built`` together, in ``spec.timing_rounds`` rounds
    (runtime cells among them: ``benchmarks/run/cells.py``). ``after_rounds(entries)`` runs
    while they are still resident (the energy pass)."""
    entries = [b for b in built if b.model is not None]
    if not entries:
        return
    base = next((b for b in entries if not b.result.techniques), None)
    cpu_ref = None
    if device.type != "cpu" and base is not None and any(
            b.device.type == "cpu" for b in entries):
        cpu_ref = Built(base.index, base.result, copy.deepcopy(base.model).cpu().eval(),
                        torch.device("cpu"), base.autocast_dtype, example=example)
        entries.append(cpu_ref)
    rounds = spec.timing_rounds
    started = time.time()
    for r in range(rounds):
        start = r % len(entries)
        left = rounds - r
        for b in entries[start:] + entries[:start]:
            if stop():
                raise Cancelled()
            report(b.result.name, b.index, f"latency round {r + 1}/{rounds}", r / rounds)
            if b.result.error is not None:
                continue
            # Each variant's budget (min_runs calls, min_time_s) is shared by the rounds it
            # has left, so what one visit overshot the next gives back: together the rounds
            # take what one sequential visit takes, at least one call each.
            runs = max(1, math.ceil((spec.min_runs - b.calls) / left))
            seconds = max(0.0, spec.min_time_s - b.window_s) / left
            try:
                visit(b, runs, seconds, warmup(b, spec), nearest=True)
            except Exception as exc:
                b.result.error = f"latency failed: {described(exc)}"
    timing = {"method": "interleaved", "rounds": rounds,
              "variants_together": len(entries) - (cpu_ref is not None),
              "window": [round(started, 3), round(time.time(), 3)]}
    if cpu_ref is not None:
        base.result.timing.keep_samples("cpu_latency_samples_ms", cpu_ref.samples)
        base.result.timing.cpu_round_p50_ms = [round(x, 6) for x in cpu_ref.rounds]
        timing["cpu_baseline"] = "timed in the same rounds, for the CPU variants' ratios"
        entries.remove(cpu_ref)
    if after_rounds is not None:
        after_rounds(entries)
    for b in entries:
        _finish(b, {**timing, **revisits(b)})
    release_memory()


# Revisits warmed up before a variant's first call is believed as fast as the others.
PENALTY_VISITS = 2


def warmup(b: Built, spec: SweepSpec) -> int:
    """Warm-up calls before a visit: the sweep's on the first; one on a revisit (the caches
    and clocks another model left), until ``PENALTY_VISITS`` revisits have shown that first
    call no slower than the variant's own spread. A ResNet-18 of ~100 ms a call on a CPU was
    not (+0.2%); its INT8 twin of 13 ms was (+9%), and keeps its warm-ups."""
    if b.visits == 0:
        return spec.warmup
    on_cpu = b.device is not None and b.device.type == "cpu"
    if b.warm_revisits and on_cpu and len(b.penalties) >= PENALTY_VISITS:
        b.warm_revisits = max(b.penalties[-PENALTY_VISITS:]) > _spread(b.samples)
    return 1 if b.warm_revisits else 0


def _spread(samples: list[float]) -> float:
    """Half the interquartile range over the median: the variant's own noise."""
    if len(samples) < 4:
        return 0.0
    q1, _, q3 = statistics.quantiles(samples, n=4)
    return (q3 - q1) / 2 / statistics.median(samples)


def revisits(b: Built) -> dict:
    """What the timing says of its revisits' warm-ups (only where they were dropped)."""
    if b.warm_revisits or not b.penalties:
        return {}
    return {"revisit_warmup": (
        f"dropped after {PENALTY_VISITS} revisits: their first call was "
        f"{max(b.penalties[-PENALTY_VISITS:]):+.1%} against the visit's median, within the "
        f"variant's spread")}
