"""How images become a pretrained model's inputs, and the label sets a folder may use.

``InputPipeline`` is what a pretrained model was trained with: resize the shorter side, crop
the centre, interpolate so, scale by this mean and std (torchvision's ``weights.transforms()``,
timm's ``resolve_data_config``). Image folders are read through it, synthetic data takes its
shape, and its mean and std become the default ``--normalize``. Torch-free until an image is
prepared.

``--labels imagenet`` reads class folders named by ImageNet-1k ids (``n01440764``...) as the
1000-class indices pretrained models emit, in the order timm ships
(``timm/data/_info/imagenet_synsets.txt``, read through ``timm.data.ImageNetInfo``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

INTERPOLATIONS = ("nearest", "bilinear", "bicubic")
LABELS = ("imagenet",)  # None: class folders in sorted order are the classes
IMAGENET_CLASSES = 1000


@dataclass(frozen=True)
class InputPipeline:
    size: tuple[int, int]          # the centre crop, H x W: what the model sees
    resize: int                    # the shorter side before the crop
    interpolation: str
    mean: tuple[float, ...]
    std: tuple[float, ...]
    origin: str                    # where it came from, e.g. "torchvision IMAGENET1K_V2"

    def __post_init__(self):
        if len(self.size) != 2 or min(self.size) < 1:
            raise ValueError(f"pipeline.size must be H,W >= 1, got {self.size!r}")
        if self.resize < min(self.size):
            raise ValueError(f"pipeline.resize {self.resize} is smaller than the crop "
                             f"{self.size}")
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(f"pipeline.interpolation must be one of "
                             f"{', '.join(INTERPOLATIONS)}; got {self.interpolation!r}")
        if len(self.mean) != len(self.std) or any(s <= 0 for s in self.std):
            raise ValueError(f"pipeline mean/std must pair up with std > 0, got "
                             f"{self.mean!r}, {self.std!r}")

    @property
    def shape(self) -> tuple[int, int, int]:
        return (len(self.mean), *self.size)

    def at(self, size: tuple[int, int]) -> InputPipeline:
        """The same pipeline cropping ``size`` instead (``--input-shape``): the resize keeps
        the weights' crop fraction (224 of 256 stays 7/8)."""
        size = (int(size[0]), int(size[1]))
        if size == self.size:
            return self
        resize = max(round(self.resize * max(size) / max(self.size)), max(size))
        return InputPipeline(size, resize, self.interpolation, self.mean, self.std,
                             self.origin)

    def normalize(self) -> str:
        """The mean and std as ``--normalize`` text (per channel joined by ':')."""
        return ",".join(":".join(f"{v:g}" for v in values) for values in (self.mean, self.std))

    def prepare(self, image):
        """A PIL image resized and centre-cropped as the weights' own transforms do."""
        from torchvision.transforms import InterpolationMode
        from torchvision.transforms import functional as F
        image = F.resize(image, self.resize, interpolation=InterpolationMode(self.interpolation),
                         antialias=True)
        return F.center_crop(image, list(self.size))

    def to_dict(self) -> dict:
        out = asdict(self)
        out["size"], out["mean"], out["std"] = list(self.size), list(self.mean), list(self.std)
        return out


def imagenet_class_index() -> dict[str, int]:
    """ImageNet-1k id (``n01440764``) -> its index in a 1000-class model's output."""
    from timm.data import ImageNetInfo
    return {wnid: i for i, wnid in enumerate(ImageNetInfo().label_names())}
