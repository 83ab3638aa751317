"""The data-parallel benchmark's scaling table as its readers get it: a typed record per run
(workers, compression, throughput with its timed steps, efficiency, bytes on the wire), read
from the stored run's variants (``launcher.DistributedLauncher``'s dicts, the JSON contract
unchanged). The figures and noise notes read these, never a run's keys. Torch-free."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields


def _number(value) -> float | None:
    """A finite number, or None (a failed run's missing figure, a JSON null, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class ScalingRun:
    """One run of the table: ``workers`` ranks with one gradient compression."""
    name: str
    workers: int
    compression: str = "none"
    amp: bool = False
    throughput: float | None = None           # samples per second, all ranks together
    scaling_efficiency: float | None = None   # against N x the one-worker run's throughput
    bytes_per_step: float | None = None
    comm_ms_per_step: float | None = None
    step_ms: float | None = None
    step_ms_samples: tuple[float, ...] = ()   # rank 0's timed steps (the throughput's noise)
    accuracy: float | None = None
    loss: float | None = None
    error: str | None = None

    @property
    def measured(self) -> bool:
        """It ran and has a throughput to draw."""
        return self.error is None and self.throughput is not None

    @property
    def series(self) -> str:
        """Its line on the charts: the compression, and AMP where it was on."""
        return self.compression + (" +amp" if self.amp else "")

    @classmethod
    def from_dict(cls, run: dict) -> "ScalingRun":
        names = {f.name for f in fields(cls)}
        data = {k: v for k, v in run.items() if k in names}
        for key in ("throughput", "scaling_efficiency", "bytes_per_step", "comm_ms_per_step",
                    "step_ms", "accuracy", "loss"):
            data[key] = _number(run.get(key))
        data["name"] = str(run.get("name") or f"w{run.get('workers')}-"
                           f"{run.get('compression', 'none')}")
        data["workers"] = int(run.get("workers") or 0)
        data["compression"] = run.get("compression") or "none"
        data["amp"] = bool(run.get("amp"))
        data["step_ms_samples"] = tuple(float(s) for s in run.get("step_ms_samples") or []
                                        if _number(s) and s > 0)
        return cls(**data)


def scaling_table(runs: list[dict]) -> list[ScalingRun]:
    """A stored distributed run's variants as the table's records, in their order."""
    return [ScalingRun.from_dict(r) for r in runs]
