"""What a place models come from answers: ``ModelSource``.

The zoo and a user's file (``benchmarks.zoo.models``), torchvision and timm
(``benchmarks.zoo.hub``) each implement it; ``models.model_source(spec)`` picks the one that owns
a ``--model`` text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn


class ModelSource:
    """One place models come from; ``spec`` is the whole ``--model`` text. Catalogue
    sources (``benchmarks.zoo.hub``) add weights, an input pipeline and a card of what was loaded."""

    name = ""

    def owns(self, spec: str) -> bool:
        raise NotImplementedError

    def check(self, spec: str) -> None:
        """ValueError when ``spec`` names nothing this source has."""

    def family(self, spec: str) -> str:
        return self.name

    def default_student(self, spec: str) -> str | None:
        return None

    def identity(self, spec: str, weights: str | None, download: bool = False) -> list:
        """What names the model's structure and starting weights in cache keys."""
        return [spec]

    def card(self, spec: str, weights: str | None, num_classes: int,
             keep_head: bool) -> dict:
        """What the model starts from beyond its name (weights, classifier), for records."""
        return {}

    def build(self, spec: str, num_classes: int, in_channels: int,
              input_size: tuple[int, int], **kwargs) -> nn.Module:
        raise NotImplementedError
