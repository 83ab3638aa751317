"""Data sets: the embedded default (scikit-learn's digits), CIFAR-10, an image folder, and
synthetic inputs for speed-only runs. All are loaded into memory as tensors once, so every
variant sees exactly the same batches and no loader process competes with the timed model.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

import numpy as np

from .inputs import IMAGENET_CLASSES

if TYPE_CHECKING:  # torch loads with the data, so menus can list data sets without it
    import torch

SPLIT_SEED = 0  # the train/validation/test split is fixed, whatever the sweep's seed
VAL_FRACTION, TEST_FRACTION = 0.1, 0.2
SYNTHETIC_CLASSES = 10
SYNTHETIC_SAMPLES = 512
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
# Data sets live in memory as float32: a shape such as 3,4096,4096 would ask for ~100 GB and
# end in an allocator traceback or the OOM killer, so more than this share of the machine's
# memory is refused up front, as bad input.
MEMORY_SHARE = 0.5


def memory_budget_bytes() -> int:
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        total = 16 * 2**30
    return int(total * MEMORY_SHARE)


def check_in_memory_size(what: str, samples: int, shape) -> None:
    need = 4 * samples
    for d in shape:
        need *= int(d)
    budget = memory_budget_bytes()
    if need > budget:
        dims = ",".join(map(str, shape))
        raise ValueError(f"{what}: {samples} samples of {dims} need {need / 2**30:.1f} GiB in "
                         f"memory, above half of this machine's ({budget / 2**30:.1f} GiB); "
                         f"give a smaller --input-shape or --batch-size")


@dataclass
class Split:
    x: torch.Tensor  # float32, N x C x H x W, normalised
    y: torch.Tensor  # int64, N

    def __len__(self) -> int:
        return len(self.y)


@dataclass
class DataBundle:
    name: str
    train: Split
    val: Split
    test: Split
    num_classes: int
    labelled: bool = True  # synthetic data has no meaningful labels: accuracy is null
    # How the inputs were scaled: {"mode", "mean", "std"} (per channel), recorded with runs.
    normalization: dict | None = None

    @property
    def in_channels(self) -> int:
        return int(self.train.x.shape[1])

    @property
    def input_size(self) -> tuple[int, int]:
        return int(self.train.x.shape[2]), int(self.train.x.shape[3])

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return (self.in_channels, *self.input_size)

    def batches(self, split: str, batch_size: int) -> Iterator[tuple[torch.Tensor, ...]]:
        """A split in order, in batches (evaluation)."""
        data: Split = getattr(self, split)
        for i in range(0, len(data), batch_size):
            yield data.x[i:i + batch_size], data.y[i:i + batch_size]

    def train_data(self, batch_size: int, seed: int):
        """The training split as the techniques take it: shuffled per step and epoch from
        each step's own key (``optimizers.base.TrainData``)."""
        from optimizers.base import TrainData
        return TrainData(self.train.x, self.train.y, batch_size, seed)

    def example_batch(self, batch_size: int) -> torch.Tensor:
        """A fixed batch of the measured shape (test inputs, repeated if the split is small)."""
        x = self.test.x if len(self.test) else self.train.x
        reps = -(-batch_size // len(x))
        return x.repeat(reps, 1, 1, 1)[:batch_size].contiguous()


def list_datasets() -> list[str]:
    from .specs import DATASETS
    return list(DATASETS)


def _stratified_split(x: np.ndarray, y: np.ndarray, num_classes: int, name: str) -> tuple:
    from sklearn.model_selection import train_test_split
    idx = np.arange(len(y))
    counts = np.bincount(y, minlength=num_classes)[np.unique(y)]  # the classes present
    stratify = y if counts.min() >= 3 else None  # tiny folders cannot be stratified
    if len(y) < 5:
        raise ValueError(f"data set {name} has {len(y)} samples; at least 5 are needed")

    def split(stratify):
        rest, test = train_test_split(idx, test_size=TEST_FRACTION, random_state=SPLIT_SEED,
                                      stratify=stratify)
        train, val = train_test_split(rest, test_size=VAL_FRACTION / (1 - TEST_FRACTION),
                                      random_state=SPLIT_SEED,
                                      stratify=None if stratify is None else y[rest])
        return train, val, test

    if stratify is not None:
        try:
            return split(stratify)
        except ValueError:
            # A stratified part needs a sample of every class: a small folder (8 images of 2
            # classes) has too few for the validation part, so it is split plainly.
            pass
    return split(None)


def _bundle(name: str, x: np.ndarray, y: np.ndarray, num_classes: int,
            splits: tuple | None = None, normalize: str = "dataset") -> DataBundle:
    """Split (unless given), then scale the [0, 1] pixels as ``normalize`` says: the training
    split's per-channel statistics, none, ImageNet's, or an explicit MEAN,STD."""
    import torch
    train, val, test = splits if splits is not None else _stratified_split(x, y, num_classes,
                                                                             name)
    xt = torch.from_numpy(x.astype(np.float32))
    yt = torch.from_numpy(y.astype(np.int64))
    mean, std, record = normalization(normalize, xt[train])
    if mean is not None:
        xt = (xt - mean) / std
    xt = xt.contiguous()
    return DataBundle(name, *(Split(xt[i], yt[i]) for i in (train, val, test)), num_classes,
                      normalization=record)


def renormalized(bundle: DataBundle, split: str, normalize: str) -> torch.Tensor:
    """A split's inputs as another ``normalize`` would have scaled them: the stored ones are
    unscaled back to [0, 1] pixels with the bundle's record, then scaled anew (the data set's
    statistics always come from the training split)."""
    import torch
    record = bundle.normalization or {"mode": "none"}

    def raw(x: torch.Tensor) -> torch.Tensor:
        if record.get("mean") is None:
            return x
        mean = torch.tensor(record["mean"]).view(1, -1, 1, 1)
        std = torch.tensor(record["std"]).view(1, -1, 1, 1)
        return x * std + mean
    mean, std, _ = normalization(normalize, raw(bundle.train.x))
    x = raw(getattr(bundle, split).x)
    return x if mean is None else (x - mean) / std


def normalization(normalize: str, train_x: torch.Tensor):
    """(mean, std) tensors shaped 1xCx1x1 (None for "none") and the record of what was used."""
    import torch

    from .specs import IMAGENET_MEAN, IMAGENET_STD, parse_normalize
    mode, mean, std = parse_normalize(normalize)
    channels = train_x.shape[1]
    if mode == "none":
        return None, None, {"mode": "none", "mean": None, "std": None}
    if mode == "dataset":
        m = train_x.mean(dim=(0, 2, 3), keepdim=True)
        s = train_x.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-6)
    else:
        if mode == "imagenet":
            mean, std = IMAGENET_MEAN, IMAGENET_STD
            if channels == 1:  # grey images: the channels' average
                mean, std = (sum(mean) / 3,), (sum(std) / 3,)
        if len(mean) == 1:
            mean, std = mean * channels, std * channels
        if len(mean) != channels:
            raise ValueError(f"normalize gives {len(mean)} channel values but the images have "
                             f"{channels} channels")
        m = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
        s = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)
    record = {"mode": mode, "mean": [round(float(v), 6) for v in m.flatten()],
              "std": [round(float(v), 6) for v in s.flatten()]}
    return m, s, record


def _digits(normalize: str = "dataset") -> DataBundle:
    """scikit-learn's digits, with the fixed split. Images and split are kept in the cache
    folder after the first load: importing scikit-learn's data sets and splitter cost 1.5 s of
    every start, a third of a warm run."""
    import os
    import tempfile
    from importlib.metadata import version

    from .cache import default_cache_dir
    folder = default_cache_dir()
    path = folder / f"digits-sklearn{version('scikit-learn')}-split{SPLIT_SEED}.npz"
    try:
        with np.load(path) as f:
            return _bundle("digits", f["x"], f["y"], 10,
                           splits=(f["train"], f["val"], f["test"]), normalize=normalize)
    except (OSError, ValueError, KeyError):
        pass  # absent or unreadable: rebuilt below
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.images / 16.0)[:, None, :, :]  # N x 1 x 8 x 8, pixel values 0..16
    splits = _stratified_split(x, d.target, 10, "digits")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".npz.tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, x=x, y=d.target, train=splits[0], val=splits[1], test=splits[2])
        os.replace(tmp, path)  # whole or not at all, for concurrent processes
    except OSError:
        pass  # a read-only cache folder only costs the next start its 1.5 s
    return _bundle("digits", x, d.target, 10, splits=splits, normalize=normalize)


def _cifar10(data_root: str | None, download: bool, normalize: str = "dataset") -> DataBundle:
    if not data_root:
        raise ValueError("cifar10 needs --data-root DIR (add --download to fetch it there)")
    root = Path(data_root).expanduser()
    if not root.is_dir() and not download:
        raise ValueError(f"data root {root} does not exist (add --download to fetch CIFAR-10)")
    from torchvision.datasets import CIFAR10
    try:
        parts = [CIFAR10(str(root), train=t, download=download) for t in (True, False)]
    except RuntimeError as exc:
        raise ValueError(f"cifar10 under {root}: {exc}".splitlines()[0]) from None
    x = np.concatenate([p.data for p in parts]).transpose(0, 3, 1, 2) / 255.0
    y = np.concatenate([np.asarray(p.targets) for p in parts])
    return _bundle("cifar10", x, y, 10, normalize=normalize)


def _imagefolder(directory: str, input_shape, normalize: str = "dataset",
                 labels: str | None = None, pipeline=None) -> DataBundle:
    """One sub-folder per class. ``labels="imagenet"``: the folders are ImageNet-1k ids and
    the labels their indices among its 1000 classes. ``pipeline`` (an ``InputPipeline``):
    each image resized and centre-cropped as a pretrained model's weights expect."""
    from PIL import Image
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise ValueError(f"imagefolder: {root} is not a directory")
    classes = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    index = _class_index(root, classes, labels)
    channels, h, w = input_shape or (pipeline.shape if pipeline is not None else (3, 32, 32))
    if channels not in (1, 3):
        raise ValueError(f"imagefolder: --input-shape channels must be 1 or 3, got {channels}")
    mode = "L" if channels == 1 else "RGB"
    files = {cls: [f for f in sorted((root / cls).iterdir())
                   if f.suffix.lower() in IMAGE_SUFFIXES and f.is_file()] for cls in classes}
    if not any(files.values()):
        raise ValueError(f"imagefolder: no images ({', '.join(IMAGE_SUFFIXES)}) under {root}")
    empty = [cls for cls in classes if not files[cls]]
    if empty:
        # A class with no images would still be an output of the model and silently lower
        # every accuracy: say which folder is empty instead.
        raise ValueError(f"imagefolder: class folder {empty[0]!r} under {root} has no images "
                         f"({len(empty)} of {len(classes)} classes are empty)")
    check_in_memory_size(f"imagefolder {root}", sum(map(len, files.values())),
                         (channels, h, w))
    xs, ys = [], []
    for cls in classes:
        for f in files[cls]:
            try:
                with Image.open(f) as im:
                    im = im.convert(mode)
                    im = pipeline.at((h, w)).prepare(im) if pipeline is not None \
                        else im.resize((w, h))
                    arr = np.asarray(im, dtype=np.float32) / 255.0
            except Exception as exc:  # noqa: BLE001
                # Pillow raises many types on hostile files (UnidentifiedImageError, OSError,
                # DecompressionBombError for a header claiming gigapixels, SyntaxError,
                # struct.error...): all of them are this file's fault, not the program's.
                raise ValueError(f"imagefolder: {f} is not a readable image "
                                 f"({type(exc).__name__})") from None
            xs.append(arr[None] if channels == 1 else arr.transpose(2, 0, 1))
            ys.append(index[cls])
    num_classes = len(classes) if labels is None else IMAGENET_CLASSES
    return _bundle(f"imagefolder:{root}", np.stack(xs), np.asarray(ys), num_classes,
                   normalize=normalize)


def _class_index(root: Path, classes: list[str], labels: str | None) -> dict[str, int]:
    if labels is None:
        if len(classes) < 2:
            raise ValueError(f"imagefolder: {root} needs one sub-folder per class (at least "
                             f"2), found {len(classes)}")
        return {cls: i for i, cls in enumerate(classes)}
    from .inputs import imagenet_class_index
    wnids = imagenet_class_index()
    if not classes:
        raise ValueError(f"imagefolder: {root} needs one sub-folder per ImageNet class id")
    unknown = [cls for cls in classes if cls not in wnids]
    if unknown:
        raise ValueError(f"imagefolder: --labels imagenet needs folders named by ImageNet-1k "
                         f"class ids (n01440764 ...); {unknown[0]!r} under {root} is not one "
                         f"({len(unknown)} of {len(classes)} folders)")
    return {cls: wnids[cls] for cls in classes}


def _synthetic(input_shape, seed: int) -> DataBundle:
    import torch
    if input_shape is None:
        raise ValueError("synthetic needs --input-shape C,H,W (for example 3,64,64)")
    check_in_memory_size("synthetic", SYNTHETIC_SAMPLES, input_shape)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(SYNTHETIC_SAMPLES, *input_shape, generator=g)
    y = torch.randint(0, SYNTHETIC_CLASSES, (SYNTHETIC_SAMPLES,), generator=g)
    n = SYNTHETIC_SAMPLES // 4
    return DataBundle("synthetic", Split(x[2 * n:], y[2 * n:]), Split(x[n:2 * n], y[n:2 * n]),
                      Split(x[:n], y[:n]), SYNTHETIC_CLASSES, labelled=False)


def load_dataset(name: str, data_root: str | None = None, download: bool = False,
                 input_shape: tuple[int, int, int] | None = None, seed: int = 0,
                 normalize: str = "dataset", labels: str | None = None,
                 pipeline=None) -> DataBundle:
    """``labels`` and ``pipeline`` apply to image folders (``_imagefolder``)."""
    if name == "digits":
        bundle = _digits(normalize)
    elif name == "cifar10":
        bundle = _cifar10(data_root, download, normalize)
    elif name.startswith("imagefolder:") and len(name) > len("imagefolder:"):
        bundle = _imagefolder(name.split(":", 1)[1], input_shape, normalize, labels, pipeline)
    elif name == "synthetic":
        bundle = _synthetic(input_shape, seed)
    else:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(list_datasets())}")
    if input_shape is not None and tuple(input_shape) != bundle.input_shape:
        got = ",".join(map(str, input_shape))
        have = ",".join(map(str, bundle.input_shape))
        raise ValueError(f"--input-shape {got} does not match {name}'s images ({have}); "
                         f"omit it or give {have}")
    return bundle
