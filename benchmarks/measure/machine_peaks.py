"""A machine's measured roofs, kept beside the weights cache as well as in each results store.

Peaks are a machine's, not a store's: a new store (a first run with another ``--store``, a
team server's second store) used to measure them again, about seven seconds here (best-of
windows for each precision, then once more where a figure read low beside other work). A store
without them now reads this file (and keeps a copy); freshly measured peaks are written to
both. What the file holds is judged as the store's are (``peaks.stale_reason``: too old, too
low, an older method), so it never keeps a roof that would be measured again otherwise. Keyed
as the store's rows are (host, device and its name, torch, threads); one file per key."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def peaks_file(key: dict, cache_dir: str | Path | None = None) -> Path:
    from benchmarks.spec.folders import default_cache_dir
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return Path(cache_dir or default_cache_dir()) / f"peaks-{digest}.json"


def read(key: dict) -> dict | None:
    """The peaks kept for ``key``, or None (absent, unreadable, another key's)."""
    try:
        kept = json.loads(peaks_file(key).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("key") != key:
        return None
    peaks = kept.get("peaks")
    return peaks if isinstance(peaks, dict) and peaks.get("gemm_flops_per_s") else None


def keep(key: dict, peaks: dict) -> None:
    """Keep ``peaks`` for ``key``; a read-only or full cache only costs the next new store a
    measurement."""
    from benchmarks.spec.atomic import DiskFull, write_text
    path = peaks_file(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps({"key": key, "peaks": peaks}), mode=0o600)
    except (OSError, DiskFull):
        pass
