"""Least recently used first: which entries of a capped folder go so that the rest fit. The
one rule the weights cache (``run.cache``) and the dashboard's exports (``export.files``)
share; each removes its own kind of entry (a file, a folder)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def least_recently_used(entries: Iterable[tuple[float, int, Path]], max_bytes: int,
                        keep: Path | None = None) -> list[Path]:
    """The paths to remove, oldest use first, until the rest of ``entries`` ((last use, bytes,
    path)) fit in ``max_bytes``; ``keep`` (the entry just written) is never one of them."""
    ordered = sorted(entries)
    total = sum(size for _, size, _ in ordered)
    out = []
    for _, size, path in ordered:
        if total <= max_bytes:
            break
        if keep is not None and path == keep:
            continue
        out.append(path)
        total -= size
    return out
