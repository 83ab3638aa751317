"""Models from torchvision's and timm's registries, from scratch or with pretrained weights
found in the local caches only.

``--model torchvision:NAME`` is any classification model of ``torchvision.models``;
``--model timm:NAME`` any model of timm's registry (``timm:NAME.TAG`` picks a pretrained tag).
Without weights the model is built for the data set (its classes, its channels, its image
size where the architecture fixes one). With ``--weights`` (a torchvision weights name such as
``DEFAULT`` or ``IMAGENET1K_V1``; ``pretrained`` for timm) the file is looked up where the
libraries keep it, torch hub's ``checkpoints`` folder and the Hugging Face cache, and read as
data: ``read_state_dict`` (safetensors, or ``torch.load(weights_only=True)``) for torchvision,
timm's own loader (safetensors, or ``weights_only=True``) for timm. When it is not there, the
run is refused in one line naming the file and the folder to put it in; nothing touches the
network unless ``--download`` says so.

The classifier is kept when the data set's labels are the weights' own (``--labels
imagenet``); otherwise it is replaced by a fresh one for the data set's classes, which the
baseline's ``--epochs`` train. Grey images get the first convolution summed over its colour
channels (timm's ``adapt_input_conv``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from benchmarks.zoo import catalogue
from benchmarks.zoo.inputs import InputPipeline
from benchmarks.zoo.source import ModelSource
from optimizers.errors import first_line

if TYPE_CHECKING:
    from torch import nn

# Seconds a download opted into with --download may wait on a silent socket.
DOWNLOAD_TIMEOUT_S = 30
# The builders torchvision runs differently when it loads weights (their own code does the
# same before load_state_dict): the aux heads exist in the checkpoints and are dropped after.
TORCHVISION_PRETRAINED_KWARGS = {
    "googlenet": {"aux_logits": True, "transform_input": True, "init_weights": False},
    "inception": {"aux_logits": True, "transform_input": True, "init_weights": False},
}
TORCHVISION_SCRATCH_KWARGS = {
    # Auxiliary heads return tuples while training: the benchmark trains on the main output.
    "googlenet": {"aux_logits": False, "init_weights": True},
    "inception": {"aux_logits": False, "init_weights": True},
}


def file_digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()[:16]


class HubSource(ModelSource):
    """A catalogue of models (torchvision or timm), with pretrained weights."""

    def owns(self, spec: str) -> bool:
        return spec.startswith(self.name + ":")

    def split(self, spec: str) -> str:
        return spec.split(":", 1)[1]

    def check(self, spec: str) -> None:
        catalogue.check_name(self.name, self.split(spec))

    def check_weights(self, spec: str, weights: str) -> None:
        catalogue.check_weights(self.name, self.split(spec), weights)

    def family(self, spec: str) -> str:
        found = catalogue.entry(self.name, self.split(spec))
        return found["family"] if found else self.name

    def default_student(self, spec: str) -> str | None:
        return catalogue.default_student(self.name, self.split(spec))

    def card(self, spec: str, weights: str | None, num_classes: int,
             keep_head: bool) -> dict:
        """What was loaded, for the run's record and the baseline's config."""
        card = {"weights": weights}
        if weights is None:
            card["head"] = f"{num_classes} classes, trained from scratch"
        elif keep_head:
            card["head"] = f"kept: the weights' own {num_classes} classes"
        else:
            card["head"] = (f"replaced: a new classifier for the data set's {num_classes} "
                            f"classes, trained by the baseline's epochs")
        return card

    # Subclasses add build, identity, weights_file (the file in the local cache) and
    # pipeline (the weights' InputPipeline).


def _replace_module(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, leaf = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, module)


def _adapt_first_conv(model: nn.Module, in_channels: int, pretrained: bool) -> None:
    """Grey (or other) images: the first 3-channel convolution takes ``in_channels``."""
    from torch import nn
    if in_channels == 3:
        return
    for name, module in model.named_modules():
        if isinstance(module, nn.Conv2d) and module.in_channels == 3:
            new = nn.Conv2d(in_channels, module.out_channels, module.kernel_size,
                            module.stride, module.padding, module.dilation, module.groups,
                            module.bias is not None)
            if pretrained:
                from timm.models import adapt_input_conv
                new.weight.data = adapt_input_conv(in_channels, module.weight.data)
                if module.bias is not None:
                    new.bias.data = module.bias.data.clone()
            _replace_module(model, name, new)
            return
    raise ValueError(f"no 3-channel input convolution to adapt to {in_channels} channels")


def _replace_head(model: nn.Module, classes: int, num_classes: int) -> str:
    """A fresh classifier for ``num_classes`` in place of the last layer emitting
    ``classes`` (a Linear, or SqueezeNet's 1x1 convolution); returns its name."""
    from torch import nn

    from optimizers.pruning import classifier_layer
    old = classifier_layer(model, classes)
    if old is None:
        raise ValueError(f"found no classifier layer with {classes} outputs to replace")
    name = next(n for n, m in model.named_modules() if m is old)
    if isinstance(old, nn.Linear):
        new = nn.Linear(old.in_features, num_classes, bias=old.bias is not None)
    else:
        new = nn.Conv2d(old.in_channels, num_classes, old.kernel_size, old.stride, old.padding,
                        bias=old.bias is not None)
    _replace_module(model, name, new)
    return name


def torch_hub_dir() -> Path:
    """``torch.hub.get_dir()`` as torch computes it (TORCH_HOME, else XDG_CACHE_HOME/torch,
    else ~/.cache/torch; then ``hub``), without importing torch: the refusal of a missing
    file comes in well under the seconds torch and torchvision take to import."""
    home = os.getenv("TORCH_HOME") or os.path.join(
        os.getenv("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "torch")
    return Path(os.path.expanduser(home)) / "hub"


class TorchvisionSource(HubSource):
    name = "torchvision"

    def resolved(self, spec: str, weights: str) -> str:
        """The weights' own name (DEFAULT -> IMAGENET1K_V2 for ResNet-50)."""
        self.check_weights(spec, weights)
        found = catalogue.entry(self.name, self.split(spec))
        return found["default"] if weights == "DEFAULT" else weights

    def weights_enum(self, spec: str, weights: str):
        from torchvision.models import get_model_weights
        return get_model_weights(self.split(spec))[self.resolved(spec, weights)]

    def weights_file(self, spec: str, weights: str, download: bool = False) -> Path:
        """The weights' file in torch hub's checkpoints folder (torch-free); refused in one
        line when it is absent (fetched first with ``download``)."""
        url = catalogue.entry(self.name, self.split(spec))["urls"][self.resolved(spec, weights)]
        folder = torch_hub_dir() / "checkpoints"
        path = folder / os.path.basename(urlparse(url).path)
        if not path.is_file() and download:
            _download(url, path)
        if not path.is_file():
            raise ValueError(f"weights {weights} of {spec} are not in the local cache: put "
                             f"{path.name} in {folder} (it is {url}), or add --download to "
                             f"fetch it")
        return path

    def pipeline(self, spec: str, weights: str) -> InputPipeline:
        t = self.weights_enum(spec, weights).transforms()
        return InputPipeline((t.crop_size[0], t.crop_size[0]), t.resize_size[0],
                             t.interpolation.value, tuple(t.mean), tuple(t.std),
                             f"torchvision {self.weights_enum(spec, weights).name} transforms")

    def identity(self, spec: str, weights: str | None, download: bool = False) -> list:
        if weights is None:
            return [self.name, self.split(spec)]
        return [self.name, self.split(spec), self.resolved(spec, weights),
                file_digest(self.weights_file(spec, weights, download))]

    def build(self, spec: str, num_classes: int, in_channels: int,
              input_size: tuple[int, int], *, weights: str | None = None,
              keep_head: bool = False, download: bool = False, **_) -> nn.Module:
        from torchvision.models import get_model

        name = self.split(spec)
        family = self.family(spec)
        size = {}
        if family == "vision_transformer":
            size = {"image_size": _square(spec, input_size)}
        elif family == "maxvit":
            size = {"input_size": tuple(input_size)}
        if weights is None:
            model = get_model(name, num_classes=num_classes, **size,
                              **TORCHVISION_SCRATCH_KWARGS.get(family, {}))
            _adapt_first_conv(model, in_channels, pretrained=False)
            return model
        from benchmarks.zoo.checkpoints import load_into, read_state_dict
        w = self.weights_enum(spec, weights)
        path = self.weights_file(spec, weights, download)
        classes = len(w.meta["categories"])
        model = get_model(name, num_classes=classes, **size,
                          **TORCHVISION_PRETRAINED_KWARGS.get(family, {}))
        state = read_state_dict(path)
        if family == "densenet":
            state = _densenet_keys(state)
        if family == "vision_transformer" and size["image_size"] != w.meta["min_size"][0]:
            from torchvision.models.vision_transformer import interpolate_embeddings
            state = interpolate_embeddings(size["image_size"], model.patch_size, state)
        load_into(model, state, path.name)
        if family == "googlenet":
            model.aux_logits, model.aux1, model.aux2 = False, None, None
        elif family == "inception":
            model.aux_logits, model.AuxLogits = False, None
        _fit_head(model, spec, classes, num_classes, keep_head)
        _adapt_first_conv(model, in_channels, pretrained=True)
        return model


def _fit_head(model: nn.Module, spec: str, classes: int, num_classes: int,
              keep_head: bool) -> None:
    if keep_head:
        if num_classes != classes:
            raise ValueError(f"the weights of {spec} emit {classes} classes but the data set "
                             f"has {num_classes}: --labels imagenet needs ImageNet-1k weights")
        return
    _replace_head(model, classes, num_classes)


def _square(spec: str, input_size) -> int:
    h, w = input_size
    if h != w:
        raise ValueError(f"{spec} needs square images, got {h}x{w}")
    return int(h)


def _densenet_keys(state: dict) -> dict:
    """torchvision's DenseNet checkpoints predate its module names ('norm.1' for 'norm1'):
    the same renaming its own loader applies."""
    import re
    pattern = re.compile(r"^(.*denselayer\d+\.(?:norm|relu|conv))\.((?:[12])\.(?:weight|bias|"
                         r"running_mean|running_var))$")
    out = {}
    for key, value in state.items():
        match = pattern.match(key)
        out[match.group(1) + match.group(2) if match else key] = value
    return out


class TimmSource(HubSource):
    name = "timm"

    def pretrained_cfg(self, spec: str):
        from timm.models import get_pretrained_cfg
        cfg = get_pretrained_cfg(self.split(spec))
        if cfg is None or not cfg.hf_hub_id:
            raise ValueError(f"{spec} has no pretrained weights in timm's registry")
        return cfg

    def check_weights(self, spec: str, weights: str) -> None:
        catalogue.check_weights(self.name, self.split(spec).split(".", 1)[0], weights)

    def hub_file(self, spec: str) -> tuple[str, str | None]:
        """(repository, file name or None for timm's usual ones) of the weights; a tagged
        name (``resnet18.a1_in1k``) asks timm, the default tag reads the catalogue."""
        name = self.split(spec)
        found = catalogue.entry(self.name, name)
        if "." not in name and found.get("hf_hub_id"):
            return found["hf_hub_id"], found.get("hf_hub_filename")
        cfg = self.pretrained_cfg(spec)
        return cfg.hf_hub_id, cfg.hf_hub_filename

    def weights_file(self, spec: str, weights: str, download: bool = False) -> Path:
        """The weights' file in the Hugging Face cache, looked up on disk only."""
        from huggingface_hub import constants, try_to_load_from_cache
        from huggingface_hub.file_download import repo_folder_name
        self.check_weights(spec, weights)
        repo, filename = self.hub_file(spec)
        files = [filename] if filename else ["model.safetensors", "pytorch_model.bin"]
        for filename in files:
            found = try_to_load_from_cache(repo, filename, cache_dir=constants.HF_HUB_CACHE)
            if isinstance(found, str):
                return Path(found)
        if download:
            from huggingface_hub import hf_hub_download
            try:
                return Path(hf_hub_download(repo, files[0], etag_timeout=DOWNLOAD_TIMEOUT_S))
            except Exception as exc:  # any network or hub failure: the same refusal below
                reason = f" (the download failed: {first_line(exc)})"
        else:
            reason = ", or add --download to fetch it"
        folder = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo,
                                                                 repo_type="model")
        raise ValueError(f"weights of {spec} are not in the local cache: put {files[0]} in "
                         f"{folder / 'snapshots' / 'main'} (from https://huggingface.co/{repo})"
                         f"{reason}")

    def pipeline(self, spec: str, weights: str) -> InputPipeline:
        import math

        from timm.data import resolve_data_config
        cfg = self.pretrained_cfg(spec)
        data = resolve_data_config(pretrained_cfg=cfg.to_dict())
        _, h, w = data["input_size"]
        # timm's own eval transform: the shorter side to size / crop_pct, then the centre crop.
        resize = math.floor(min(h, w) / data.get("crop_pct", 1.0))
        return InputPipeline((h, w), resize, data["interpolation"], tuple(data["mean"]),
                             tuple(data["std"]), f"timm data config of {cfg.hf_hub_id}")

    def identity(self, spec: str, weights: str | None, download: bool = False) -> list:
        from importlib.metadata import version
        parts = [self.name, self.split(spec), version("timm")]
        if weights is None:
            return parts
        return parts + [self.hub_file(spec)[0],
                        file_digest(self.weights_file(spec, weights, download))]

    def build(self, spec: str, num_classes: int, in_channels: int,
              input_size: tuple[int, int], *, weights: str | None = None,
              keep_head: bool = False, download: bool = False, **_) -> nn.Module:
        import timm
        name = self.split(spec)
        kwargs = {"in_chans": in_channels}
        cfg = timm.models.get_pretrained_cfg(name)
        if cfg is not None and cfg.fixed_input_size and tuple(input_size) != \
                tuple(cfg.input_size[1:]):
            kwargs["img_size"] = tuple(input_size)
        if weights is None:
            return _timm_create(spec, name, num_classes=num_classes, **kwargs)
        path = self.weights_file(spec, weights, download)
        classes = self.pretrained_cfg(spec).num_classes
        model = _timm_create(spec, name, pretrained=True, num_classes=classes,
                             pretrained_cfg_overlay={"file": str(path)}, **kwargs)
        if keep_head:
            _fit_head(model, spec, classes, num_classes, keep_head)
        else:
            model.reset_classifier(num_classes)
        return model


def _timm_create(spec: str, name: str, **kwargs):
    import timm
    try:
        return timm.create_model(name, **kwargs)
    except (RuntimeError, ValueError, TypeError, AssertionError, KeyError) as exc:
        raise ValueError(f"timm could not build {spec}: {type(exc).__name__}: "
                         f"{first_line(exc)}") from None


def _download(url: str, path: Path) -> None:
    """Fetch ``url`` into ``path`` (only with --download), never waiting on a silent socket
    for more than DOWNLOAD_TIMEOUT_S."""
    import socket

    import torch
    path.parent.mkdir(parents=True, exist_ok=True)
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)
    try:
        torch.hub.download_url_to_file(url, str(path), progress=False)
    except Exception as exc:  # any network failure: the caller's refusal names the file
        raise ValueError(f"could not download {url}: {first_line(exc)}") from None
    finally:
        socket.setdefaulttimeout(previous)


SOURCES = (TorchvisionSource(), TimmSource())
