"""The on-disk cache of trained weights, so the second run of the same sweep trains nothing.

A key is a hash of everything that changes the weights: the model (and the content of a
user's factory file), the data set, budgets, seed, learning rate, library versions, and a
version of the training code itself. Entries are safetensors files (data, never code),
written to a temporary name and renamed, so concurrent processes never read half a file.
The structure is rebuilt deterministically by the caller; only weights are cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from .checkpoints import load_into, save_state_dict

# Bump when the training recipe changes, so stale weights are not reused. 2: every step draws
# its data order from its own key; pruning fine-tunes at a tenth of the rate; normalisation and
# the device's precision are in the key.
TRAINING_CODE_VERSION = 2


def _torchvision_version() -> str:
    # Read from the package's metadata: importing torchvision costs 1.6 s of start-up.
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("torchvision")
    except PackageNotFoundError:
        return "absent"


def default_cache_dir() -> Path:
    env = os.environ.get("COMPRESSION_BENCH_CACHE")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "compression-bench"


class MissingWeights(ValueError):
    """Trained weights a read-only cache does not hold (an export never retrains)."""


class WeightsCache:
    """``train_missing=False`` makes a read-only cache: a miss raises ``MissingWeights``
    instead of training, so an export rebuilds exactly the weights a run measured or
    refuses."""

    def __init__(self, directory: str | Path | None = None, enabled: bool = True,
                 train_missing: bool = True):
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.enabled = enabled
        self.train_missing = train_missing
        self.hits = self.misses = 0

    def key(self, parts: tuple) -> str:
        payload = json.dumps([TRAINING_CODE_VERSION, torch.__version__, _torchvision_version(),
                              *parts], sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:24]

    def path(self, parts: tuple) -> Path:
        return self.directory / f"{self.key(parts)}.safetensors"

    def has(self, parts: tuple) -> bool:
        return self.enabled and self.path(parts).exists()

    def put(self, key: str, state: dict) -> None:
        """Add weights trained elsewhere (another GPU, a Ray node) under their key."""
        if not self.enabled:
            return
        from safetensors.torch import save_file
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        os.close(fd)
        try:
            save_file(state, tmp)
            os.replace(tmp, self.directory / f"{key}.safetensors")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def __call__(self, parts: tuple, build: Callable[[], nn.Module],
                 train: Callable[[nn.Module], None]) -> nn.Module:
        """Cached weights for ``parts`` loaded into ``build()``, else ``train`` them and save."""
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
                return model.eval()
            except Exception:
                # A broken entry is rebuilt rather than trusted; the rename below replaces it.
                model = build()
        if not self.train_missing:
            raise MissingWeights(f"its trained weights ({path.name}) are not in the weights "
                                 f"cache {self.directory}")
        self.misses += 1
        train(model)
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        os.close(fd)
        try:
            save_state_dict(model, tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return model
