"""What a measured variant is: raw samples kept, statistics derived from them.

``VariantResult.to_dict()`` is the JSON contract of DESIGN.md (``latency_ms``, ``size_mb``...)
plus extensions (the raw latency samples, sparsity, wall times); ``from_dict`` reads it back
and a test checks the round trip.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field, fields

# Above this spread (IQR / median) a latency is flagged as noisy rather than shown as exact.
NOISY_IQR_RATIO = 0.10
MB = 1024 * 1024


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
    size_bytes: int | None = None
    size_gzip_bytes: int | None = None
    params: int | None = None
    nonzero_params: int | None = None
    flops: int | None = None  # per sample
    layer_sparsity: dict[str, float] | None = None
    error: str | None = None
    started_at: str | None = None
    wall_s: float | None = None
    phase_s: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def latency(self) -> LatencyStats | None:
        if not self.latency_samples_ms:
            return None
        return LatencyStats.from_samples(self.latency_samples_ms, self.batch_size)

    @property
    def throughput(self) -> float | None:
        """Samples per second at the median batch latency."""
        lat = self.latency
        if lat is None or lat.p50 <= 0:
            return None
        return self.batch_size / (lat.p50 / 1000.0)

    def to_dict(self) -> dict:
        lat = self.latency
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
            "peak_memory_mb": None if self.peak_memory_bytes is None
            else self.peak_memory_bytes / MB,
            "memory_method": self.memory_method,
            "size_mb": None if self.size_bytes is None else self.size_bytes / MB,
            "size_gzip_mb": None if self.size_gzip_bytes is None else self.size_gzip_bytes / MB,
            "params": self.params,
            "nonzero_params": self.nonzero_params,
            "flops": self.flops,
            "error": self.error,
        }
        # Extensions beyond the contract: raw figures, so nothing is stored twice or lost.
        out["raw"] = {k: v for k, v in asdict(self).items() if k in (
            "latency_samples_ms", "batch_size", "peak_memory_bytes", "size_bytes",
            "size_gzip_bytes", "layer_sparsity", "started_at", "wall_s", "phase_s")}
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "VariantResult":
        raw = data.get("raw") or {}
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs.update({k: v for k, v in raw.items() if k in known})
        if "batch_size" not in raw and data.get("latency_ms"):
            kwargs["batch_size"] = data["latency_ms"]["batch_size"]
        return cls(**kwargs)

    def flat_row(self) -> dict:
        """One flat row for a table, a CSV or a DataFrame."""
        lat = self.latency
        d = self.to_dict()
        return {
            "variant": self.name,
            "techniques": "+".join(self.techniques) or "-",
            "device": self.device,
            "accuracy": self.accuracy,
            "p50_ms": lat.p50 if lat else None,
            "p90_ms": lat.p90 if lat else None,
            "p99_ms": lat.p99 if lat else None,
            "mean_ms": lat.mean if lat else None,
            "std_ms": lat.std if lat else None,
            "n": lat.n if lat else None,
            "noisy": lat.noisy if lat else None,
            "throughput": self.throughput,
            "peak_memory_mb": d["peak_memory_mb"],
            "memory_method": self.memory_method,
            "size_mb": d["size_mb"],
            "size_gzip_mb": d["size_gzip_mb"],
            "params": self.params,
            "nonzero_params": self.nonzero_params,
            "flops": self.flops,
            "error": self.error,
        }


# The figures of the comparison table, with the direction that is better.
COMPARED = {
    "accuracy": "higher",
    "p50_ms": "lower",
    "throughput": "higher",
    "peak_memory_mb": "lower",
    "size_mb": "lower",
    "size_gzip_mb": "lower",
    "params": "lower",
    "nonzero_params": "lower",
    "flops": "lower",
}


def comparison_rows(results: list[VariantResult]) -> list[dict]:
    """Every figure plus its change against the baseline (the first variant without
    techniques): accuracy in points, the others as a ratio (``x`` suffix) so '0.25x size'
    reads the same for any unit. Built once here; pages and the CLI only render it."""
    rows = [r.flat_row() for r in results]
    base = next((r for r, res in zip(rows, results) if not res.techniques and res.ok), None)
    for row in rows:
        for key in COMPARED:
            value, ref = row.get(key), (base or {}).get(key)
            if value is None or ref is None:
                row[f"{key}_vs_base"] = None
            elif key == "accuracy":
                row[f"{key}_vs_base"] = (value - ref) * 100.0  # points
            else:
                row[f"{key}_vs_base"] = value / ref if ref else None
    return rows


def pareto_front(points: list[tuple[str, float, float]]) -> list[str]:
    """Names of the non-dominated (accuracy higher, latency lower) points, by latency."""
    front, best_acc = [], -math.inf
    for name, acc, lat in sorted(points, key=lambda p: (p[2], -p[1])):
        if acc > best_acc:
            front.append(name)
            best_acc = acc
    return front
