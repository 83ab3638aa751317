"""The on-disk cache of trained weights, so the second run of the same sweep trains nothing.

A key is a hash of everything that changes the weights: the model (and the content of a
user's factory file), the data set, budgets, seed, learning rate, library versions, and a
version of the training code itself. Entries are safetensors files (data, never code),
written to a temporary name and renamed (``spec.atomic``), so concurrent processes never read
half a file and a full disk leaves no partial one: it raises ``DiskFull``, one line.
The structure is rebuilt deterministically by the caller; only weights are cached.

The cache is capped (``COMPRESSION_BENCH_CACHE_MB``): after each write, the least recently
used entries (an entry's modification time is refreshed on every hit) are deleted until the
entries fit. Evicting only costs a retrain: a key names everything that makes the weights.
The folder is created owner-only. Torch is imported on first use, so the dashboard can show
the cache's use without it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.measure.environment import library_version
from benchmarks.spec.atomic import disk_full_as_one_line, write_atomic
from benchmarks.spec.folders import default_cache_dir, private_folder

if TYPE_CHECKING:
    from torch import nn

ENTRY_SUFFIX = ".safetensors"

# Bump when the training recipe changes, so stale weights are not reused. 2: every step draws
# its data order from its own key; pruning fine-tunes at a tenth of the rate; normalisation and
# the device's precision are in the key.
TRAINING_CODE_VERSION = 2


def _entries(directory: Path) -> list[tuple[float, int, Path]]:
    """(last use, bytes, path) of every entry, least recently used first."""
    found = []
    try:
        for path in Path(directory).glob(f"*{ENTRY_SUFFIX}"):
            try:
                st = path.stat()
            except OSError:
                continue  # evicted by another process meanwhile
            found.append((st.st_mtime, st.st_size, path))
    except OSError:
        return []
    return sorted(found)


def usage_bytes(directory: str | Path | None = None) -> int:
    """What the cache's entries take on disk."""
    return sum(size for _, size, _ in _entries(Path(directory or default_cache_dir())))


def evict(directory: str | Path, max_bytes: int, keep: Path | None = None) -> int:
    """Delete least recently used entries until the rest fit in ``max_bytes`` (``keep``, the
    entry just written, stays). Returns how many were deleted."""
    from benchmarks.spec.lru import least_recently_used
    going = least_recently_used(_entries(Path(directory)), max_bytes, keep)
    for path in going:
        try:
            path.unlink()
        except FileNotFoundError:
            pass  # another process evicted it first
    return len(going)


class MissingWeights(ValueError):
    """Trained weights a read-only cache does not hold (an export never retrains)."""


class WeightsCache:
    """``train_missing=False`` makes a read-only cache: a miss raises ``MissingWeights``
    instead of training, so an export rebuilds exactly the weights a run measured or
    refuses. ``max_bytes`` caps the entries on disk (least recently used go first)."""

    def __init__(self, directory: str | Path | None = None, enabled: bool = True,
                 max_bytes: int | None = None, train_missing: bool = True):
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.enabled = enabled
        self.train_missing = train_missing
        if max_bytes is None:
            from benchmarks.spec.limits import MIB, Limits
            max_bytes = Limits.from_env().cache_mb * MIB
        self.max_bytes = max_bytes
        self.hits = self.misses = 0

    def key(self, parts: tuple) -> str:
        import torch
        payload = json.dumps([TRAINING_CODE_VERSION, torch.__version__, library_version("torchvision"),
                              *parts], sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:24]

    def path(self, parts: tuple) -> Path:
        return self.directory / f"{self.key(parts)}{ENTRY_SUFFIX}"

    def has(self, parts: tuple) -> bool:
        return self.enabled and self.path(parts).exists()

    def put(self, key: str, state: dict) -> None:
        """Add weights trained elsewhere (another GPU, a Ray node) under their key."""
        if self.enabled:
            from safetensors.torch import save_file
            self._save(self.directory / f"{key}{ENTRY_SUFFIX}", lambda tmp: save_file(state, tmp))

    def _save(self, path: Path, write: Callable[[str], None]) -> None:
        """Write an entry whole or not at all (a temporary file renamed, removed on any
        error: concurrent processes never read half a file, a full disk keeps nothing),
        owner-only, then trim the cache to its cap. A full disk raises ``DiskFull``."""
        with disk_full_as_one_line(self.directory, path.name):
            private_folder(self.directory)
        write_atomic(path, write, mode=0o600)
        evict(self.directory, self.max_bytes, keep=path)

    def __call__(self, parts: tuple, build: Callable[[], nn.Module],
                 train: Callable[[nn.Module], None]) -> nn.Module:
        """Cached weights for ``parts`` loaded into ``build()``, else ``train`` them and save."""
        from benchmarks.zoo.checkpoints import load_into, save_state_dict
        model = build()
        if not self.enabled and self.train_missing:
            train(model)
            return model
        path = self.path(parts)
        if path.exists():
            try:
                from safetensors.torch import load_file
                load_into(model, load_file(str(path)), path.name)
                self.hits += 1
                _touch(path)
                return model.eval()
            except Exception:
                # A broken entry is rebuilt rather than trusted; the rename below replaces it.
                model = build()
        if not self.train_missing:
            raise MissingWeights(f"its trained weights ({path.name}) are not in the weights "
                                 f"cache {self.directory}")
        self.misses += 1
        train(model)
        self._save(path, lambda tmp: save_state_dict(model, tmp))
        return model


def _touch(path: Path) -> None:
    """Mark an entry used now (its modification time is its last use)."""
    try:
        os.utime(path)
    except OSError:
        pass  # evicted meanwhile, or a read-only cache: its order just stays
