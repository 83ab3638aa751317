"""What a measured variant is: raw samples kept, statistics derived from them.

``VariantResult.to_dict()`` is the JSON contract of docs/ARCHITECTURE.md (``latency_ms``, ``size_mb``...)
plus extensions (axes, the accuracy interval, per-seed accuracies, how it was timed, and a
``raw`` block: latency samples, per-example correctness, sparsity, wall times); ``from_dict``
reads it back and a test checks the round trip. Every variant set against the baseline:
``benchmarks.report.comparisons``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from benchmarks.measure import roofline
from benchmarks.report.records import Cost, Provenance, Scores, Timing

MB = 1024 * 1024
# Where each record's fields sit in the JSON: at the top level (the contract's names) or in
# the ``raw`` block. Timing's ``how`` is the JSON's "timing"; Scores' ``seeds`` is the raw
# list (the top level's "seeds" is their summary).
TOP_LEVEL = {Timing: {"timing": "how"},
             Scores: {"accuracy": "accuracy"},
             Cost: {k: k for k in ("params", "nonzero_params", "flops", "flops_effective",
                                   "memory_method", "mac_census", "energy")},
             Provenance: {"built_on": "built_on", "timed_on": "timed_on"}}
RAW = {Timing: ("latency_samples_ms", "batch_size", "cpu_latency_samples_ms", "host_samples_ms",
                "sample_stats", "round_p50_ms", "cpu_round_p50_ms", "timed_calls",
                "timed_window_s"),
       Scores: ("correct_bits", "n_test", "seeds", "seed_accuracies", "predictions"),
       Cost: ("peak_memory_bytes", "traffic_bytes", "size_bytes", "size_gzip_bytes",
              "layer_sparsity"),
       Provenance: ("started_at", "wall_s", "phase_s", "cache")}
RECORDS = ((Timing, "timing"), (Scores, "scores"), (Cost, "cost"), (Provenance, "provenance"))


@dataclass
class VariantResult:
    """One measured variant: what it is (name, techniques, config, where it sits on the
    sweep's axes), and the records it is made of."""
    name: str
    techniques: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    device: str = "cpu"
    # Where the variant sits on each swept setting: {"prune.ratio": 0.6, ...}.
    axes: dict = field(default_factory=dict)
    error: str | None = None
    # Why the row has no figure though nothing failed: a cell an instruction-set profile
    # cannot preview (its kernels ignore the cap: ``benchmarks.run.profiles``). Shown as
    # "n/a (why)"; not a failure (``failed``), not a measurement (``ok``).
    not_applicable: str | None = None
    warnings: list[str] = field(default_factory=list)
    timing: Timing = field(default_factory=Timing)
    scores: Scores = field(default_factory=Scores)
    cost: Cost = field(default_factory=Cost)
    provenance: Provenance = field(default_factory=Provenance)
    # A runtime cell (docs/ARCHITECTURE.md's runtime cells): {"name", "version", "precision",
    # "prepare_s", "first_call_ms", "parity", "ops", "variant", "batch_size", "threads"...};
    # None for a sweep without deployment axes (an eager row as before).
    runtime: dict | None = None
    # Per-layer SQNR and cosine similarity against the baseline on a fixed batch
    # (``benchmarks.sensitivity.diagnostics``); None for the baseline.
    diagnostics: dict | None = None

    @classmethod
    def of(cls, name: str, techniques=(), **figures) -> "VariantResult":
        """A result from its figures by their flat names, as the JSON spells them
        (``accuracy``, ``latency_samples_ms``, ``size_bytes``; ``timing`` the how): each goes
        to its record. Fixtures and tools write results this way."""
        records = {}
        for record, attr in RECORDS:
            names = {f.name for f in fields(record) if not f.name.startswith("_")}
            if record is Timing and isinstance(figures.get("timing"), dict):
                figures["how"] = figures.pop("timing")
            records[attr] = record(**{k: figures.pop(k) for k in list(figures) if k in names})
        return cls(name, list(techniques), **figures, **records)

    @property
    def ok(self) -> bool:
        """Measured: neither failed nor not applicable."""
        return self.error is None and self.not_applicable is None

    @property
    def failed(self) -> bool:
        return self.error is not None

    def roofline(self, environment: dict) -> dict:
        """This variant on its device's roofline, against the peaks the run's environment card
        holds, or those of the instruction-set cap it was timed under
        (``benchmarks.measure.roofline``: figures are None where an input is missing)."""
        lat = self.timing.latency
        peaks, why = roofline.row_peaks(environment, self.device, self.runtime)
        out = roofline.point(
            flops=self.cost.flops, batch_size=self.timing.batch_size,
            p50_ms=lat.p50 if lat else None, traffic_bytes=self.cost.traffic_bytes,
            precision=roofline.variant_precision(self.config, environment, self.device,
                                                 census=self.cost.mac_census,
                                                 runtime=self.runtime),
            peaks=peaks)
        if why and out["achieved_flops_per_s"] is not None and not out.get("roofline_warning"):
            out["peak_note"] = why
        return out

    def to_dict(self) -> dict:
        timing, scores, cost = self.timing, self.scores, self.cost
        lat = timing.latency
        ci = scores.interval
        out = {
            "name": self.name,
            "techniques": list(self.techniques),
            "config": self.config,
            "device": self.device,
            "accuracy": scores.accuracy,
            "latency_ms": None if lat is None else {
                k: getattr(lat, k) for k in ("p50", "p90", "p99", "mean", "std", "n",
                                             "batch_size", "iqr_over_median", "noisy")},
            "throughput": timing.throughput,
            "throughput_sustained": timing.throughput_sustained,
            "contention": timing.contention,
            "peak_memory_mb": None if cost.peak_memory_bytes is None
            else cost.peak_memory_bytes / MB,
            "memory_method": cost.memory_method,
            "size_mb": None if cost.size_bytes is None else cost.size_bytes / MB,
            "size_gzip_mb": None if cost.size_gzip_bytes is None else cost.size_gzip_bytes / MB,
            "params": cost.params,
            "nonzero_params": cost.nonzero_params,
            "flops": cost.flops,
            "error": self.error,
            # Extensions (schema 1 readers ignore what they do not know).
            **({"not_applicable": self.not_applicable} if self.not_applicable else {}),
            "flops_effective": cost.flops_effective,
            "axes": dict(self.axes),
            "accuracy_ci": None if ci is None else list(ci),
            "seeds": scores.seed_summary,
            "timing": dict(timing.how),
            "launch_bound": timing.launch_bound,
            "warnings": list(self.warnings),
            "built_on": list(self.provenance.built_on),
            "timed_on": self.provenance.timed_on,
            "diagnostics": self.diagnostics,
        }
        if self.runtime is not None:
            out["runtime"] = dict(self.runtime)
        if cost.mac_census is not None:
            out["mac_census"] = dict(cost.mac_census)
        if cost.energy is not None:
            out["energy"] = dict(cost.energy)
        # Raw figures, so nothing is stored twice or lost (in the order they always had).
        raw = {}
        for record in (timing, cost, self.provenance, scores):
            kept = asdict(record)
            raw.update({k: kept[k] for k in RAW[type(record)]})
        out["raw"] = {k: raw[k] for k in RAW_ORDER}
        if scores.predictions is not None:  # rows without them keep the bytes they had
            out["raw"]["predictions"] = scores.predictions
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "VariantResult":
        raw = data.get("raw") or {}
        own = {f.name for f in fields(cls)} - {attr for _, attr in RECORDS}
        kwargs = {k: v for k, v in data.items() if k in own and v is not None}
        records = {}
        for record, attr in RECORDS:
            values = {name: data[key] for key, name in TOP_LEVEL[record].items()
                      if data.get(key) is not None}
            values.update({k: raw[k] for k in RAW[record] if k in raw})
            records[attr] = record(**values)
        if "batch_size" not in raw and data.get("latency_ms"):
            records["timing"].batch_size = data["latency_ms"]["batch_size"]
        return cls(**kwargs, **records)

    def flat_row(self) -> dict:
        """One flat row for a table, a CSV or a DataFrame."""
        timing, cost = self.timing, self.cost
        lat = timing.latency
        ci = self.scores.interval
        seeds = self.scores.seed_summary
        return {
            "variant": self.name,
            "techniques": "+".join(self.techniques) or "-",
            "device": self.device,
            **{f"axis:{k}": v for k, v in self.axes.items()},
            "accuracy": self.scores.accuracy,
            "accuracy_ci_low": ci[0] if ci else None,
            "accuracy_ci_high": ci[1] if ci else None,
            "accuracy_seed_mean": seeds["mean"] if seeds else None,
            "accuracy_seed_std": seeds["std"] if seeds else None,
            "p50_ms": lat.p50 if lat else None,
            "p90_ms": lat.p90 if lat else None,
            "p99_ms": lat.p99 if lat else None,
            "mean_ms": lat.mean if lat else None,
            "std_ms": lat.std if lat else None,
            "n": lat.n if lat else None,
            "noisy": lat.noisy if lat else None,
            "launch_bound": timing.launch_bound,
            "timing": timing.how.get("method"),
            "throughput": timing.throughput,
            "throughput_sustained": timing.throughput_sustained,
            "contention": timing.contention,
            "peak_memory_mb": None if cost.peak_memory_bytes is None
            else cost.peak_memory_bytes / MB,
            "memory_method": cost.memory_method,
            "size_mb": None if cost.size_bytes is None else cost.size_bytes / MB,
            "size_gzip_mb": None if cost.size_gzip_bytes is None else cost.size_gzip_bytes / MB,
            "params": cost.params,
            "nonzero_params": cost.nonzero_params,
            "flops": cost.flops,
            "flops_effective": cost.flops_effective,
            "error": self.error,
            # Only in sweeps with deployment axes: other runs' tables keep their columns.
            **(runtime_columns(self) if self.runtime is not None or cost.energy is not None
               else {}),
        }


# The raw block's keys in the order the flat dataclass wrote them (stored JSON stays the same
# bytes for the same figures).
RAW_ORDER = ("latency_samples_ms", "batch_size", "peak_memory_bytes", "traffic_bytes",
             "size_bytes", "size_gzip_bytes", "layer_sparsity", "started_at", "wall_s",
             "phase_s", "correct_bits", "n_test", "seeds", "seed_accuracies",
             "cpu_latency_samples_ms", "host_samples_ms", "round_p50_ms", "cpu_round_p50_ms",
             "timed_calls", "timed_window_s", "cache", "sample_stats")


def runtime_columns(result: VariantResult) -> dict:
    """A row's deployment columns: its runtime, batch size and threads (eager, the sweep's,
    for a row without a runtime entry), parity and census, energy."""
    rt = result.runtime or {}
    parity = rt.get("parity") or {}
    ops = rt.get("ops") or {}
    return {"runtime": rt.get("name", "eager"), "runtime_variant": rt.get("variant",
                                                                          result.name),
            "batch_size": result.timing.batch_size, "threads": rt.get("threads"),
            "profile": (rt.get("profile") or {}).get("name"),
            "profile_label": (rt.get("profile") or {}).get("label"),
            "not_applicable": result.not_applicable,
            # The share of its multiply-adds whose kernels obeyed its profile's cap.
            "under_cap": ((rt.get("profile") or {}).get("kernels") or {}).get("obey"),
            "runtime_precision": rt.get("precision"), "prepare_s": rt.get("prepare_s"),
            "first_call_ms": rt.get("first_call_ms"),
            "parity_top1_agree": parity.get("top1_agree"),
            "parity_max_abs": parity.get("max_abs"), "parity_badge": parity.get("badge"),
            "p_value_vs_eager": parity.get("p_value_vs_eager"),
            "int_kernels": ops.get("int_kernels"), "float_kernels": ops.get("float_kernels"),
            "quant_dequant": ops.get("quant_dequant"), "int8_real": ops.get("int8_real"),
            "ops_verdict": ops.get("verdict"),
            "runtime_notes": "; ".join(rt.get("notes") or []) or None,
            "joules_per_inference": (result.cost.energy or {}).get("joules_per_inference"),
            # Each interleaved round's p50: the grid's best runtime is a paired bootstrap
            # over them (``report.runtimes.verdict``).
            "round_p50_ms": list(result.timing.round_p50_ms) or None}
