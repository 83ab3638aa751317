"""The records a measured variant is made of: how fast it ran (``Timing``), how well it scored
(``Scores``), what it costs to hold and run (``Cost``) and where and when it was made
(``Provenance``). Raw samples are kept; statistics are derived from them.

``VariantResult`` (results.py) holds one of each beside the variant's identity; its JSON, the
contract, is flat as before: these records are how the engine reads it, not a new format.
"""

from __future__ import annotations

import math
import statistics
from array import array
from dataclasses import asdict, dataclass, field

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
class Timing:
    """How fast: every kept sample of the measured batch, and how they were taken."""
    latency_samples_ms: list[float] = field(default_factory=list)
    batch_size: int = 1
    # How the latency was taken: {"method": "interleaved"|"sequential", "rounds", ...}
    # (the JSON's "timing").
    how: dict = field(default_factory=dict)
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
    # For a sample list thinned to KEPT_SAMPLES: the statistics of all its samples (the
    # fields of LatencyStats), by list name.
    sample_stats: dict = field(default_factory=dict)
    _latency_cache: tuple = field(default=(), repr=False, compare=False)

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
    def launch_bound(self) -> bool | None:
        """True when the device time per call is about the host's time to issue it (within
        LAUNCH_BOUND_RATIO): the GPU waited on the host, so the figure is the launch overhead,
        not the kernels. None where no host time was taken (CPU runs)."""
        if not self.host_samples_ms or not self.latency_samples_ms:
            return None
        host = self.stats_of("host_samples_ms").p50
        return bool(host and self.latency.p50 <= LAUNCH_BOUND_RATIO * host)


@dataclass
class Scores:
    """How well: top-1 accuracy and one bit per test example, for paired tests against any
    variant; with --seeds N, the accuracy of the variant rebuilt from scratch with each seed."""
    accuracy: float | None = None
    correct_bits: str | None = None  # test-split order
    n_test: int | None = None
    # Each test example's top-1 class, packed (``stats.pack_labels``), test-split order: the
    # certificate's agreement risk pairs them with the baseline's.
    predictions: str | None = None
    seeds: list[int] = field(default_factory=list)
    seed_accuracies: list[float] = field(default_factory=list)

    @property
    def interval(self) -> tuple[float, float] | None:
        """The accuracy's 95% Wilson interval."""
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


@dataclass
class Cost:
    """What it costs to hold and to run: bytes on disk and in memory, parameters, work."""
    size_bytes: int | None = None
    size_gzip_bytes: int | None = None
    params: int | None = None
    nonzero_params: int | None = None
    flops: int | None = None            # per sample, every multiply-add the kernels execute
    flops_effective: int | None = None  # per sample, multiply-adds whose weight is non-zero
    layer_sparsity: dict[str, float] | None = None
    peak_memory_bytes: int | None = None
    memory_method: str | None = None
    # Bytes one forward of the measured batch moves (weights, input, every op's output written
    # and read once): the roofline's arithmetic intensity is FLOPs over these.
    traffic_bytes: int | None = None
    # Multiply-adds per batch by the precision they ran in (``measure.macs.mac_census``): the
    # roofline's precision is the one most of them run in, not the technique's name.
    mac_census: dict | None = None
    # Energy per inference where a counter was read (NVML, RAPL): {"joules_per_inference",
    # "idle_w", "seconds", "method", "measured": True}; None elsewhere.
    energy: dict | None = None


@dataclass
class Provenance:
    """When, where and from what it was made."""
    started_at: str | None = None
    wall_s: float | None = None
    phase_s: dict[str, float] = field(default_factory=dict)
    # The weights cache during this variant's build: {"hits": n, "misses": m} (a miss trained).
    cache: dict = field(default_factory=dict)
    # Where its weights were trained (one entry per seed, when an executor trained them
    # elsewhere) and where it was measured and timed.
    built_on: list[str] = field(default_factory=list)
    timed_on: str | None = None
