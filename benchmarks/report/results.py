"""What a measured variant is: raw samples kept, statistics derived from them.

``VariantResult.to_dict()`` is the JSON contract of docs/ARCHITECTURE.md (``latency_ms``, ``size_mb``...)
plus extensions (axes, the accuracy interval, per-seed accuracies, how it was timed, and a
``raw`` block: latency samples, per-example correctness, sparsity, wall times); ``from_dict``
reads it back and a test checks the round trip. Every variant set against the baseline:
``benchmarks.report.comparisons``.
"""

from __future__ import annotations

import math
import statistics
from array import array
from dataclasses import asdict, dataclass, field, fields

from benchmarks.measure import roofline
from benchmarks.report import stats

# Above this spread (IQR / median) a latency is flagged as noisy rather than shown as exact.
NOISY_IQR_RATIO = 0.10
# A device time per call at most this multiple of the host's time to issue the call is
# launch-bound: kernels that took longer would have let the host run ahead.
LAUNCH_BOUND_RATIO = 1.2
# The median call's rate more than this fraction away from the rate sustained over the timed
# windows (calls x batch / their wall time) flags contention: calls beyond the median
# (preemptions, a neighbour's bursts) took that share of the machine. On a quiet machine the
# two agree within a few percent (the loop's own overhead and a short right tail).
CONTENTION_FRACTION = 0.20
MB = 1024 * 1024
# A variant keeps at most this many raw samples per list: an even subsample over the whole
# timing (every interleaved round stays represented), rounded to float32. The statistics of a
# thinned list are taken from every sample first and kept beside it (``sample_stats``), so a
# p99 over 10,000 samples stays that p99; 2,048 float32 samples take 8 KiB in the store.
KEPT_SAMPLES = 2048
SAMPLE_LISTS = ("latency_samples_ms", "host_samples_ms", "cpu_latency_samples_ms")


def _quantile(sorted_samples: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default method)."""
    if not sorted_samples:
        return math.nan
    pos = (len(sorted_samples) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_samples[lo] + (sorted_samples[hi] - sorted_samples[lo]) * (pos - lo)


@dataclass(frozen=True)
class LatencyStats:
    p50: float
    p90: float
    p99: float
    mean: float
    std: float
    n: int
    batch_size: int
    iqr: float
    iqr_over_median: float
    noisy: bool

    @classmethod
    def from_samples(cls, samples_ms: list[float], batch_size: int) -> "LatencyStats":
        if not samples_ms:
            raise ValueError("latency needs at least one sample")
        s = sorted(samples_ms)
        p50 = _quantile(s, 0.5)
        iqr = _quantile(s, 0.75) - _quantile(s, 0.25)
        ratio = iqr / p50 if p50 > 0 else 0.0
        return cls(p50=p50, p90=_quantile(s, 0.9), p99=_quantile(s, 0.99),
                   mean=statistics.fmean(s), std=statistics.pstdev(s) if len(s) > 1 else 0.0,
                   n=len(s), batch_size=batch_size, iqr=iqr, iqr_over_median=ratio,
                   noisy=ratio > NOISY_IQR_RATIO)


def kept_samples(samples: list[float], keep: int = KEPT_SAMPLES) -> list[float]:
    """At most ``keep`` of ``samples``, evenly spaced in time order, as float32 values."""
    if len(samples) > keep:
        step = len(samples) / keep
        samples = [samples[int(i * step)] for i in range(keep)]
    return array("f", samples).tolist()


@dataclass
class VariantResult:
    name: str
    techniques: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    device: str = "cpu"
    accuracy: float | None = None
    latency_samples_ms: list[float] = field(default_factory=list)
    batch_size: int = 1
    peak_memory_bytes: int | None = None
    memory_method: str | None = None
    # Bytes one forward of the measured batch moves (weights, input, every op's output written
    # and read once): the roofline's arithmetic intensity is FLOPs over these.
    traffic_bytes: int | None = None
    # Multiply-adds per batch by the precision they ran in (``measure.macs.mac_census``): the
    # roofline's precision is the one most of them run in, not the technique's name.
    mac_census: dict | None = None
    size_bytes: int | None = None
    size_gzip_bytes: int | None = None
    params: int | None = None
    nonzero_params: int | None = None
    flops: int | None = None            # per sample, every multiply-add the kernels execute
    flops_effective: int | None = None  # per sample, multiply-adds whose weight is non-zero
    layer_sparsity: dict[str, float] | None = None
    error: str | None = None
    started_at: str | None = None
    wall_s: float | None = None
    phase_s: dict[str, float] = field(default_factory=dict)
    # Where the variant sits on each swept setting: {"prune.ratio": 0.6, ...}.
    axes: dict = field(default_factory=dict)
    # One bit per test example (test-split order): paired tests against any variant.
    correct_bits: str | None = None
    n_test: int | None = None
    # With --seeds N: the accuracy of the variant rebuilt from scratch with each seed.
    seeds: list[int] = field(default_factory=list)
    seed_accuracies: list[float] = field(default_factory=list)
    # How the latency was taken: {"method": "interleaved"|"sequential", "rounds", ...}.
    timing: dict = field(default_factory=dict)
    # In a CUDA sweep whose INT8 variants run on the CPU, the baseline is timed on the CPU
    # too, in the same rounds: their ratios are taken against these samples.
    cpu_latency_samples_ms: list[float] = field(default_factory=list)
    # Host-side milliseconds per timed call (CUDA: beside the events, to see launch-bound runs).
    host_samples_ms: list[float] = field(default_factory=list)
    # The p50 of each interleaved timing round (and of the CPU baseline's, beside it): a
    # speed-up's interval resamples whole rounds, the unit host drift comes in.
    round_p50_ms: list[float] = field(default_factory=list)
    cpu_round_p50_ms: list[float] = field(default_factory=list)
    # Every timed call and the wall time of the timed loops they ran in (warm-ups and the
    # other variants' visits excluded): the rate sustained, beside the median call's.
    timed_calls: int | None = None
    timed_window_s: float | None = None
    warnings: list[str] = field(default_factory=list)
    # The weights cache during this variant's build: {"hits": n, "misses": m} (a miss trained).
    cache: dict = field(default_factory=dict)
    # Where its weights were trained (one entry per seed, when an executor trained them
    # elsewhere) and where it was measured and timed.
    built_on: list[str] = field(default_factory=list)
    timed_on: str | None = None
    # For a sample list thinned to KEPT_SAMPLES: the statistics of all its samples (the
    # fields of LatencyStats), by list name.
    sample_stats: dict = field(default_factory=dict)
    # A runtime cell (docs/ARCHITECTURE.md's runtime cells): {"name", "version", "precision",
    # "prepare_s", "first_call_ms", "parity", "ops", "variant", "batch_size", "threads"...};
    # None for a sweep without deployment axes (an eager row as before).
    runtime: dict | None = None
    # Energy per inference where a counter was read (NVML, RAPL): {"joules_per_inference",
    # "idle_w", "seconds", "method", "measured": True}; None elsewhere.
    energy: dict | None = None
    # Per-layer SQNR and cosine similarity against the baseline on a fixed batch
    # (``benchmarks.sensitivity.diagnostics``); None for the baseline.
    diagnostics: dict | None = None
    _latency_cache: tuple = field(default=(), repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None

    def keep_samples(self, name: str, samples: list[float]) -> None:
        """Set a sample list (one of SAMPLE_LISTS) to what is kept of ``samples``; when that
        thins it, its statistics are taken from every sample first."""
        kept = kept_samples(samples)
        self.sample_stats.pop(name, None)
        if len(kept) < len(samples):
            self.sample_stats[name] = asdict(LatencyStats.from_samples(samples,
                                                                       self.batch_size))
        setattr(self, name, kept)

    def stats_of(self, name: str) -> LatencyStats | None:
        """The statistics of a sample list: of all its samples, also when it was thinned."""
        if name in self.sample_stats:
            return LatencyStats(**self.sample_stats[name])
        samples = getattr(self, name)
        return LatencyStats.from_samples(samples, self.batch_size) if samples else None

    @property
    def latency(self) -> LatencyStats | None:
        """Derived from the raw samples once per sample list (samples are only appended to
        or replaced, never edited in place)."""
        samples = self.latency_samples_ms
        if not samples:
            return None
        key = (id(samples), len(samples), self.batch_size)
        if not self._latency_cache or self._latency_cache[0] != key:
            self._latency_cache = (key, self.stats_of("latency_samples_ms"))
        return self._latency_cache[1]

    @property
    def throughput(self) -> float | None:
        """Samples per second at the median batch latency."""
        lat = self.latency
        if lat is None or lat.p50 <= 0:
            return None
        return self.batch_size / (lat.p50 / 1000.0)

    @property
    def throughput_sustained(self) -> float | None:
        """Samples per second over the timed windows: samples timed / their wall time."""
        if not self.timed_calls or not self.timed_window_s or self.timed_window_s <= 0:
            return None
        return self.timed_calls * self.batch_size / self.timed_window_s

    @property
    def contention(self) -> bool | None:
        """True when the median call's rate and the rate sustained differ by more than
        CONTENTION_FRACTION (of the median's): the median dodged what the machine's other
        work cost the calls around it. None where no window was recorded."""
        median, sustained = self.throughput, self.throughput_sustained
        if not median or not sustained:
            return None
        return abs(sustained / median - 1.0) > CONTENTION_FRACTION

    @property
    def accuracy_ci(self) -> tuple[float, float] | None:
        if self.accuracy is None or not self.n_test:
            return None
        return stats.wilson_interval(round(self.accuracy * self.n_test), self.n_test)

    @property
    def seed_summary(self) -> dict | None:
        if len(self.seed_accuracies) < 2:
            return None
        summary = stats.mean_interval(self.seed_accuracies)
        return {"seeds": list(self.seeds), "accuracies": list(self.seed_accuracies),
                "mean": summary["mean"], "std": summary["std"], "ci": summary["ci"]}

    @property
    def launch_bound(self) -> bool | None:
        """True when the device time per call is about the host's time to issue it (within
        LAUNCH_BOUND_RATIO): the GPU waited on the host, so the figure is the launch overhead,
        not the kernels. None where no host time was taken (CPU runs)."""
        if not self.host_samples_ms or not self.latency_samples_ms:
            return None
        host = self.stats_of("host_samples_ms").p50
        return bool(host and self.latency.p50 <= LAUNCH_BOUND_RATIO * host)

    def roofline(self, environment: dict) -> dict:
        """This variant on its device's roofline, against the peaks the run's environment card
        holds (``benchmarks.measure.roofline.point``: figures are None where an input is missing)."""
        lat = self.latency
        return roofline.point(
            flops=self.flops, batch_size=self.batch_size, p50_ms=lat.p50 if lat else None,
            traffic_bytes=self.traffic_bytes,
            precision=roofline.variant_precision(self.config, environment, self.device,
                                                 census=self.mac_census,
                                                 runtime=self.runtime),
            peaks=roofline.device_peaks(environment.get("peaks"), self.device))

    def to_dict(self) -> dict:
        lat = self.latency
        ci = self.accuracy_ci
        out = {
            "name": self.name,
            "techniques": list(self.techniques),
            "config": self.config,
            "device": self.device,
            "accuracy": self.accuracy,
            "latency_ms": None if lat is None else {
                k: getattr(lat, k) for k in ("p50", "p90", "p99", "mean", "std", "n",
                                             "batch_size", "iqr_over_median", "noisy")},
            "throughput": self.throughput,
            "throughput_sustained": self.throughput_sustained,
            "contention": self.contention,
            "peak_memory_mb": None if self.peak_memory_bytes is None
            else self.peak_memory_bytes / MB,
            "memory_method": self.memory_method,
            "size_mb": None if self.size_bytes is None else self.size_bytes / MB,
            "size_gzip_mb": None if self.size_gzip_bytes is None else self.size_gzip_bytes / MB,
            "params": self.params,
            "nonzero_params": self.nonzero_params,
            "flops": self.flops,
            "error": self.error,
            # Extensions (schema 1 readers ignore what they do not know).
            "flops_effective": self.flops_effective,
            "axes": dict(self.axes),
            "accuracy_ci": None if ci is None else list(ci),
            "seeds": self.seed_summary,
            "timing": dict(self.timing),
            "launch_bound": self.launch_bound,
            "warnings": list(self.warnings),
            "built_on": list(self.built_on),
            "timed_on": self.timed_on,
            "diagnostics": self.diagnostics,
        }
        if self.runtime is not None:
            out["runtime"] = dict(self.runtime)
        if self.mac_census is not None:
            out["mac_census"] = dict(self.mac_census)
        if self.energy is not None:
            out["energy"] = dict(self.energy)
        # Raw figures, so nothing is stored twice or lost.
        out["raw"] = {k: v for k, v in asdict(self).items() if k in (
            "latency_samples_ms", "batch_size", "peak_memory_bytes", "traffic_bytes",
            "size_bytes", "size_gzip_bytes", "layer_sparsity", "started_at", "wall_s", "phase_s",
            "correct_bits", "n_test", "seeds", "seed_accuracies", "cpu_latency_samples_ms",
            "host_samples_ms", "cache", "sample_stats", "round_p50_ms", "cpu_round_p50_ms",
            "timed_calls", "timed_window_s")}
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "VariantResult":
        raw = data.get("raw") or {}
        known = {f.name for f in fields(cls)} - {"_latency_cache", "seeds"}
        kwargs = {k: v for k, v in data.items() if k in known and v is not None}
        kwargs.update({k: v for k, v in raw.items() if k in known | {"seeds"}})
        if "batch_size" not in raw and data.get("latency_ms"):
            kwargs["batch_size"] = data["latency_ms"]["batch_size"]
        return cls(**kwargs)

    def flat_row(self) -> dict:
        """One flat row for a table, a CSV or a DataFrame."""
        lat = self.latency
        d = self.to_dict()
        seeds = self.seed_summary
        return {
            "variant": self.name,
            "techniques": "+".join(self.techniques) or "-",
            "device": self.device,
            **{f"axis:{k}": v for k, v in self.axes.items()},
            "accuracy": self.accuracy,
            "accuracy_ci_low": d["accuracy_ci"][0] if d["accuracy_ci"] else None,
            "accuracy_ci_high": d["accuracy_ci"][1] if d["accuracy_ci"] else None,
            "accuracy_seed_mean": seeds["mean"] if seeds else None,
            "accuracy_seed_std": seeds["std"] if seeds else None,
            "p50_ms": lat.p50 if lat else None,
            "p90_ms": lat.p90 if lat else None,
            "p99_ms": lat.p99 if lat else None,
            "mean_ms": lat.mean if lat else None,
            "std_ms": lat.std if lat else None,
            "n": lat.n if lat else None,
            "noisy": lat.noisy if lat else None,
            "launch_bound": self.launch_bound,
            "timing": self.timing.get("method"),
            "throughput": self.throughput,
            "throughput_sustained": self.throughput_sustained,
            "contention": self.contention,
            "peak_memory_mb": d["peak_memory_mb"],
            "memory_method": self.memory_method,
            "size_mb": d["size_mb"],
            "size_gzip_mb": d["size_gzip_mb"],
            "params": self.params,
            "nonzero_params": self.nonzero_params,
            "flops": self.flops,
            "flops_effective": self.flops_effective,
            "error": self.error,
            # Only in sweeps with deployment axes: other runs' tables keep their columns.
            **(runtime_columns(self) if self.runtime is not None or self.energy is not None
               else {}),
        }


def runtime_columns(result: VariantResult) -> dict:
    """A row's deployment columns: its runtime, batch size and threads (eager, the sweep's,
    for a row without a runtime entry), parity and census, energy."""
    rt = result.runtime or {}
    parity = rt.get("parity") or {}
    ops = rt.get("ops") or {}
    return {"runtime": rt.get("name", "eager"), "runtime_variant": rt.get("variant",
                                                                          result.name),
            "batch_size": result.batch_size, "threads": rt.get("threads"),
            "profile": (rt.get("profile") or {}).get("name"),
            "profile_label": (rt.get("profile") or {}).get("label"),
            "runtime_precision": rt.get("precision"), "prepare_s": rt.get("prepare_s"),
            "first_call_ms": rt.get("first_call_ms"),
            "parity_top1_agree": parity.get("top1_agree"),
            "parity_max_abs": parity.get("max_abs"), "parity_badge": parity.get("badge"),
            "p_value_vs_eager": parity.get("p_value_vs_eager"),
            "int_kernels": ops.get("int_kernels"), "float_kernels": ops.get("float_kernels"),
            "quant_dequant": ops.get("quant_dequant"), "int8_real": ops.get("int8_real"),
            "ops_verdict": ops.get("verdict"),
            "runtime_notes": "; ".join(rt.get("notes") or []) or None,
            "joules_per_inference": (result.energy or {}).get("joules_per_inference"),
            # Each interleaved round's p50: the grid's best runtime is a paired bootstrap
            # over them (``report.runtimes.verdict``).
            "round_p50_ms": list(result.round_p50_ms) or None}
