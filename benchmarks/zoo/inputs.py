"""How images become a pretrained model's inputs, and the label sets a folder may use.

``InputPipeline`` is what a pretrained model was trained with: resize the shorter side, crop
the centre, interpolate so, scale by this mean and std (torchvision's ``weights.transforms()``,
timm's ``resolve_data_config``). Image folders are read through it, synthetic data takes its
shape, and its mean and std become the default ``--normalize``. Without weights an image
folder's pictures are covered and centre-cropped alike (``cover_and_crop``), or squashed with
``--resize squash``; ``pipeline_record`` is what the environment card says of it. Torch-free
until an image is prepared.

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


# The filter of a squashed image: PIL's ``Image.resize`` default for RGB and L images, what
# runs before ``--resize`` used.
SQUASH_FILTER = "bicubic"


def cover_and_crop(image, size: tuple[int, int], interpolation: str = "bilinear"):
    """A PIL image scaled (its aspect ratio kept) to the smallest size that covers ``size``
    (H, W), then centre-cropped to it: nothing is stretched, the least is cut. For a square
    shape that is "resize the shorter side to it", the weights' pipelines without their
    margin (they resize to 256 to crop 224)."""
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as F
    h, w = size
    scale = max(h / image.height, w / image.width)
    covered = [max(h, round(image.height * scale)), max(w, round(image.width * scale))]
    image = F.resize(image, covered, interpolation=InterpolationMode(interpolation),
                     antialias=True)
    return F.center_crop(image, [h, w])


def image_preparer(size: tuple[int, int], resize: str = "crop",
                   pipeline: InputPipeline | None = None):
    """How each image of a folder becomes ``size``: the weights' pipeline (``crop`` with
    pretrained weights), covered and centre-cropped (``crop``), or squashed (``squash``)."""
    h, w = size
    if resize == "squash":
        return lambda im: im.resize((w, h))
    if pipeline is not None:
        return pipeline.at((h, w)).prepare
    return lambda im: cover_and_crop(im, (h, w))


def pipeline_record(dataset: str, size: tuple[int, int], resize: str = "crop",
                    pipeline: InputPipeline | None = None) -> dict:
    """The environment card's ``data.pipeline``: how the data set's images became the
    model's input size (every run has one)."""
    size = [int(size[0]), int(size[1])]
    if not dataset.startswith("imagefolder:"):
        return {"mode": "as loaded", "size": size,
                "origin": f"{dataset}: the data set's own images, no resize"}
    if resize == "squash":
        return {"mode": "squash", "size": size, "interpolation": SQUASH_FILTER,
                "origin": "--resize squash: resized straight to the input shape, the aspect "
                          "ratio lost"}
    if pipeline is not None:
        return {"mode": "crop", **pipeline.at(tuple(size)).to_dict()}
    return {"mode": "crop", "size": size, "interpolation": "bilinear", "antialias": True,
            "resize": "the smallest scale that covers the size, the aspect ratio kept",
            "origin": "image folder default: covered, then centre-cropped"}


def imagenet_class_index() -> dict[str, int]:
    """ImageNet-1k id (``n01440764``) -> its index in a 1000-class model's output."""
    from timm.data import ImageNetInfo
    return {wnid: i for i, wnid in enumerate(ImageNetInfo().label_names())}
