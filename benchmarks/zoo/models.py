"""Where models come from: the zoo (a registry that fills menus), a user's file, and the
torchvision and timm catalogues (``benchmarks.zoo.hub``), each a ``ModelSource``
(``benchmarks.zoo.source``).

Every model adapts to the data set: ``build_model(spec, num_classes, in_channels,
input_size)``. A zoo entry names its family and the narrower member of that family that
distillation uses as its default student. A user's model is ``path/file.py:factory`` with
``factory(num_classes, in_channels) -> nn.Module``; its weights come from a checkpoint read as
data only (``checkpoints.py``). ``torchvision:NAME`` and ``timm:NAME`` may also load their
pretrained weights (``--weights``) from the local caches.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.spec.folders import PROJECT_ROOT
from benchmarks.zoo.source import ModelSource
from optimizers.errors import first_line

if TYPE_CHECKING:  # torch loads on first build, so menus can list models without it
    import torch
    from torch import nn

# Images at most this small get the small-input stems (no early down-sampling), as is usual
# for CIFAR-sized inputs: a 224-pixel stem would shrink an 8x8 digit to nothing.
SMALL_INPUT = 32


@dataclass(frozen=True)
class ModelEntry:
    name: str
    family: str
    build: Callable[[int, int, tuple[int, int]], nn.Module]
    description: str
    student: str | None = None  # the default student when this model is the teacher
    listed: bool = True


_REGISTRY: dict[str, ModelEntry] = {}


def register_model(name: str, family: str, description: str, student: str | None = None):
    def wrap(fn):
        _REGISTRY[name] = ModelEntry(name, family, fn, description, student)
        return fn
    return wrap


def list_models() -> list[str]:
    return sorted(_REGISTRY)


def model_entry(name: str) -> ModelEntry:
    if name not in _REGISTRY:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(list_models())} "
                         f"or give FILE.py:FACTORY")
    return _REGISTRY[name]


def create_model(name: str, num_classes: int, in_channels: int,
                 input_size: tuple[int, int] = (32, 32)) -> nn.Module:
    entry = model_entry(name)
    return entry.build(num_classes, in_channels, tuple(input_size))


def default_student(spec: str) -> str | None:
    """The default distillation student of any source's model, or None."""
    return model_source(spec).default_student(spec)


# -- the article's CNN ---------------------------------------------------------------------

def _seed_cnn(num_classes, in_channels, input_size, width=64):
    from torch import nn
    h, w = input_size
    if h < 5 or w < 5:
        raise ValueError(f"input {h}x{w} does not fit seed_cnn: it needs at least 5x5 pixels")
    # The article's net, with the Flatten it forgot: two unpadded 3x3 convs take 4 pixels
    # off each side before the classifier.
    return nn.Sequential(
        nn.Conv2d(in_channels, width, 3), nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3), nn.ReLU(),
        nn.Flatten(),
        nn.Linear(2 * width * (h - 4) * (w - 4), num_classes),
    )


register_model("seed_cnn", "seed_cnn", "the article's two-conv CNN (Flatten fixed)",
               student="seed_cnn_narrow")(_seed_cnn)
register_model("seed_cnn_narrow", "seed_cnn", "the article's CNN at a quarter of the width",
               )(partial(_seed_cnn, width=16))


# -- torchvision ---------------------------------------------------------------------------

def _small(input_size) -> bool:
    return min(input_size) <= SMALL_INPUT


def _resnet(num_classes, in_channels, input_size, layers=(2, 2, 2, 2)):
    from torch import nn
    from torchvision.models.resnet import BasicBlock, ResNet
    model = ResNet(BasicBlock, list(layers), num_classes=num_classes)
    if _small(input_size):
        model.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    elif in_channels != 3:
        model.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
    return model


register_model("resnet18", "resnet", "torchvision ResNet-18 (3x3 stem for small images)",
               student="resnet10")(_resnet)
register_model("resnet10", "resnet", "ResNet with one block per stage (ResNet-18's student)",
               )(partial(_resnet, layers=(1, 1, 1, 1)))


def _mobilenet(num_classes, in_channels, input_size, width_mult=1.0):
    from torch import nn
    from torchvision.models import mobilenet_v3_small
    model = mobilenet_v3_small(num_classes=num_classes, width_mult=width_mult)
    first = model.features[0][0]
    stride = 1 if _small(input_size) else 2
    model.features[0][0] = nn.Conv2d(in_channels, first.out_channels, 3, stride=stride,
                                     padding=1, bias=False)
    return model


register_model("mobilenet_v3_small", "mobilenet", "torchvision MobileNetV3-Small",
               student="mobilenet_v3_small_half")(_mobilenet)
register_model("mobilenet_v3_small_half", "mobilenet", "MobileNetV3-Small at half width",
               )(partial(_mobilenet, width_mult=0.5))


def _vit(num_classes, in_channels, input_size, hidden=192, layers=4, heads=3):
    from torch import nn
    from torchvision.models.vision_transformer import VisionTransformer
    h, w = input_size
    if h != w:
        raise ValueError(f"vit_tiny needs square images, got {h}x{w}")
    # About 16 patches per side at most: enough tokens, and short sequences keep it fast.
    patch = next(p for p in (16, 8, 4, 2, 1) if h % p == 0 and h // p >= min(4, h))
    model = VisionTransformer(image_size=h, patch_size=patch, num_layers=layers,
                              num_heads=heads, hidden_dim=hidden, mlp_dim=4 * hidden,
                              num_classes=num_classes)
    model.conv_proj = nn.Conv2d(in_channels, hidden, kernel_size=patch, stride=patch)
    return model


register_model("vit_tiny", "vit", "a small torchvision VisionTransformer (4 layers, 192 wide)",
               student="vit_nano")(_vit)
register_model("vit_nano", "vit", "vit_tiny's student (2 layers, 96 wide)",
               )(partial(_vit, hidden=96, layers=2, heads=3))


def _mlp(num_classes, in_channels, input_size, hidden=(256, 128)):
    from torch import nn
    h, w = input_size
    dims = [in_channels * h * w, *hidden]
    layers: list[nn.Module] = [nn.Flatten()]
    for a, b in zip(dims, dims[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    layers.append(nn.Linear(dims[-1], num_classes))
    return nn.Sequential(*layers)


register_model("mlp", "mlp", "a three-layer perceptron", student="mlp_small")(_mlp)
register_model("mlp_small", "mlp", "a narrow perceptron (mlp's student)",
               )(partial(_mlp, hidden=(64,)))


# -- a user's own model --------------------------------------------------------------------

def models_dir() -> Path:
    """The operator's folder of model files the dashboard may offer and run."""
    env = os.environ.get("COMPRESSION_BENCH_MODELS_DIR")
    return Path(env) if env else PROJECT_ROOT / "models"


def is_user_model(spec: str) -> bool:
    return ":" in spec and spec.rsplit(":", 1)[0].endswith(".py")


def user_model_digest(spec: str) -> str:
    """Content hash of the factory file: part of every cache key for user models."""
    path = Path(spec.rsplit(":", 1)[0])
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def load_user_factory(spec: str, allowed_dir: str | Path | None = None) -> Callable:
    """``path/file.py:factory`` -> the factory. The file is the operator's or the CLI user's
    own code, run in their own process; the dashboard only offers files from a server-side
    folder (``allowed_dir``) and never runs uploaded code."""
    file_part, _, factory_name = spec.rpartition(":")
    path = Path(file_part).expanduser()
    if not factory_name.isidentifier():
        raise ValueError(f"model {spec!r}: after ':' give the factory function's name")
    if allowed_dir is not None:
        root = Path(allowed_dir).resolve()
        if root not in path.resolve().parents:
            raise ValueError(f"model file {path} is outside the allowed models folder {root}")
    if not path.is_file():
        raise ValueError(f"model file {path} does not exist")
    module_name = "user_model_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    try:
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        module_spec.loader.exec_module(module)
    except Exception as exc:  # any error inside the user's file is their input's problem
        sys.modules.pop(module_name, None)
        raise ValueError(f"model file {path} failed to import: "
                         f"{type(exc).__name__}: {first_line(exc)}") from None
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise ValueError(f"model file {path} has no function {factory_name!r}")
    return factory


def build_user_model(spec: str, num_classes: int, in_channels: int,
                     allowed_dir: str | Path | None = None) -> nn.Module:
    from torch import nn
    factory = load_user_factory(spec, allowed_dir)
    try:
        model = factory(num_classes, in_channels)
    except Exception as exc:
        raise ValueError(f"model factory {spec} raised {type(exc).__name__}: "
                         f"{first_line(exc)}") from None
    if not isinstance(model, nn.Module):
        raise ValueError(f"model factory {spec} returned {type(model).__name__}, "
                         f"not a torch.nn.Module")
    return model


class ZooSource(ModelSource):
    name = "zoo"

    def owns(self, spec: str) -> bool:
        return True  # the fallback: anything no other source claims

    def check(self, spec: str) -> None:
        model_entry(spec)

    def family(self, spec: str) -> str:
        return model_entry(spec).family

    def default_student(self, spec: str) -> str | None:
        return _REGISTRY[spec].student if spec in _REGISTRY else None

    def build(self, spec, num_classes, in_channels, input_size, **kwargs):
        return create_model(spec, num_classes, in_channels, input_size)


class FileSource(ModelSource):
    name = "file"

    def owns(self, spec: str) -> bool:
        return is_user_model(spec)

    def check(self, spec: str) -> None:
        if not Path(spec.rsplit(":", 1)[0]).expanduser().is_file():
            raise ValueError(f"model file {spec.rsplit(':', 1)[0]} does not exist")

    def family(self, spec: str) -> str:
        return f"file {Path(spec.rsplit(':', 1)[0]).name}"

    def identity(self, spec: str, weights: str | None, download: bool = False) -> list:
        return ["user", Path(spec).name, user_model_digest(spec)]

    def build(self, spec, num_classes, in_channels, input_size, *, allowed_dir=None,
              **kwargs):
        return build_user_model(spec, num_classes, in_channels, allowed_dir)


def _sources() -> tuple[ModelSource, ...]:
    from benchmarks.zoo.hub import SOURCES
    from benchmarks.zoo.lm import LMSource
    return (FileSource(), *SOURCES, LMSource(), ZooSource())


def model_source(spec: str) -> ModelSource:
    """The source that owns ``spec``: a file, ``torchvision:``, ``timm:``, a language model
    (``benchmarks.zoo.lm``), else the zoo."""
    return next(s for s in _sources() if s.owns(spec))


def check_model(spec: str) -> None:
    """ValueError with one line when ``spec`` names no model (torch-free)."""
    model_source(spec).check(spec)


def preflight(spec: str, weights: str | None, download: bool = False) -> None:
    """What can be refused before torch loads (torch-free, milliseconds): a model no source
    has, pretrained weights absent from the local caches."""
    source = model_source(spec)
    source.check(spec)
    if weights is not None:
        source.weights_file(spec, weights, download)


def build_model(spec: str, num_classes: int, in_channels: int, input_size: tuple[int, int],
                allowed_dir: str | Path | None = None, *, weights: str | None = None,
                keep_head: bool = False, download: bool = False) -> nn.Module:
    """A model from any source; any failure is a ValueError with one line. ``weights`` and
    ``keep_head`` apply to the torchvision and timm catalogues (``hub_models``)."""
    return model_source(spec).build(spec, num_classes, in_channels, input_size,
                                    allowed_dir=allowed_dir, weights=weights,
                                    keep_head=keep_head, download=download)


def check_input_fits(model: nn.Module, example: torch.Tensor, num_classes: int,
                     model_name: str) -> None:
    """One forward pass on a batch of the measured shape, before anything runs."""
    import torch
    shape = "x".join(map(str, example.shape[1:]))
    try:
        with torch.inference_mode():
            out = model.eval()(example)
    except Exception as exc:
        raise ValueError(f"input shape {shape} does not fit model {model_name}: "
                         f"{type(exc).__name__}: {first_line(exc)}") from None
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[1] != num_classes:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"model {model_name} must return logits of shape (batch, {num_classes}) "
                         f"for input {shape}; got {got}")

