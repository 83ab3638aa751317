"""Trained weights in memory, keyed like the on-disk weights cache: what travels between a
sweep's driver and the processes or nodes that train its variants."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from benchmarks.run.cache import WeightsCache
from benchmarks.zoo.checkpoints import load_into


def state_of(model: nn.Module) -> dict:
    """A model's weights as plain CPU tensors (safe to pickle, put in Ray's object store)."""
    return {k: v.detach().cpu().clone().contiguous() for k, v in model.state_dict().items()}


class MemoryCache:
    """A weights cache in memory: entries given are hits; what is trained is recorded under
    the same key the on-disk cache would use (``WeightsCache.key``), so a driver can add it to
    its own cache and rebuild the same models."""

    enabled = True

    def __init__(self, entries: dict[str, dict] | None = None, fallback=None):
        self.entries = dict(entries or {})
        self.recorded: dict[str, dict] = {}
        self.hits = self.misses = 0
        # Asked for what is not in memory: the sweep's own (on-disk) cache, if any.
        self.fallback = fallback
        self._keys = WeightsCache(enabled=False)

    def key(self, parts: tuple) -> str:
        return self._keys.key(parts)

    def path(self, parts: tuple):
        return None

    def has(self, parts: tuple) -> bool:
        return self.key(parts) in self.entries or bool(
            self.fallback is not None and self.fallback.has(parts))

    def add(self, weights: dict[str, dict]) -> None:
        """Weights trained elsewhere; also kept in the sweep's own cache when there is one."""
        self.entries.update(weights)
        if self.fallback is not None and hasattr(self.fallback, "put"):
            for key, state in weights.items():
                self.fallback.put(key, state)

    def __call__(self, parts: tuple, build: Callable[[], nn.Module],
                 train: Callable[[nn.Module], None]) -> nn.Module:
        key = self.key(parts)
        if key in self.entries:
            model = build()
            load_into(model, self.entries[key], key)
            self.hits += 1
            return model.eval()
        if self.fallback is not None:
            before = self.fallback.misses
            model = self.fallback(parts, build, train)
            trained = self.fallback.misses > before
            self.misses += trained
            self.hits += not trained
            return model
        self.misses += 1
        model = build()
        train(model)
        self.entries[key] = self.recorded[key] = state_of(model)
        return model
