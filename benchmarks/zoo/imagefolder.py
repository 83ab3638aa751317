"""An image folder as a data set (``imagefolder:DIR``): one sub-folder per class, listed
without reading an image (its size before loading), then decoded straight into one uint8
array in split order so that the splits are views of it. ``--labels imagenet``: the folders
are ImageNet-1k class ids scored by a pretrained model's own head. The folder's identity
in cache keys and seeds is the sha256 of what was decoded (classes, labels, pixels), so a copy
of the same images elsewhere, or written again, is the same data set.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from benchmarks.zoo.datasets import (
    DataBundle,
    DataRequest,
    DataSize,
    make_bundle,
    stratified_split,
)
from benchmarks.zoo.inputs import IMAGENET_CLASSES, image_preparer

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
STOP_EVERY = 64      # files decoded between two looks at should_stop


def _image_files(directory: str, input_shape, labels: str | None = None,
                 pipeline=None) -> tuple[Path, list[str], dict, tuple, dict]:
    """The folder's classes, each one's image file names (sorted) and label, checked, without
    reading an image. ``labels="imagenet"``: the folders are ImageNet-1k ids and the labels
    their indices among its 1000 classes."""
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise ValueError(f"imagefolder: {root} is not a directory")
    classes = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    index = _class_index(root, classes, labels)
    channels, h, w = input_shape or (pipeline.shape if pipeline is not None else (3, 32, 32))
    if channels not in (1, 3):
        raise ValueError(f"imagefolder: --input-shape channels must be 1 or 3, got {channels}")
    files = {cls: _image_names(root / cls) for cls in classes}
    if not any(files.values()):
        raise ValueError(f"imagefolder: no images ({', '.join(IMAGE_SUFFIXES)}) under {root}")
    empty = [cls for cls in classes if not files[cls]]
    if empty:
        # A class with no images would still be an output of the model and silently lower
        # every accuracy: say which folder is empty instead.
        raise ValueError(f"imagefolder: class folder {empty[0]!r} under {root} has no images "
                         f"({len(empty)} of {len(classes)} classes are empty)")
    return root, classes, files, (channels, h, w), index


def _image_names(folder: Path) -> list[str]:
    """The image files of one class folder, by name, sorted. scandir's entries know their
    type without a stat per file: listing 100,000 images takes a fraction of a second."""
    with os.scandir(folder) as entries:
        return sorted(e.name for e in entries
                      if os.path.splitext(e.name)[1].lower() in IMAGE_SUFFIXES and e.is_file())


def load_imagefolder(request: DataRequest) -> DataBundle:
    """One sub-folder per class (``_image_files``), each image prepared by
    ``inputs.image_preparer``: resized to cover the input shape and centre-cropped (a
    pretrained model's ``pipeline`` where there is one), or squashed when asked."""
    from PIL import Image

    from benchmarks.spec.cancel import Cancelled
    directory, input_shape, labels = request.argument, request.input_shape, request.labels
    pipeline, should_stop = request.pipeline, request.should_stop

    def check_stop():
        if should_stop is not None and should_stop():
            raise Cancelled()

    root, classes, files, (channels, h, w), index = _image_files(directory, input_shape,
                                                                 labels, pipeline)
    check_stop()
    mode = "L" if channels == 1 else "RGB"
    prepare = image_preparer((h, w), request.resize, pipeline)
    paths = [root / cls / name for cls in classes for name in files[cls]]
    y = np.asarray([index[cls] for cls in classes for _ in files[cls]])
    num_classes = len(classes) if labels is None else IMAGENET_CLASSES
    # The split depends on the labels only: decode each image straight into its place in
    # split order, so the three splits are views of one uint8 array.
    train, val, test = stratified_split(np.zeros(len(y)), y, num_classes, f"imagefolder:{root}")
    check_stop()
    order = np.concatenate([train, val, test])
    x = np.empty((len(order), channels, h, w), dtype=np.uint8)
    for slot, i in enumerate(order):
        if slot % STOP_EVERY == 0:
            check_stop()
        f = paths[i]
        try:
            with Image.open(f) as im:
                arr = np.asarray(prepare(im.convert(mode)), dtype=np.uint8)
        except Exception as exc:  # noqa: BLE001
            # Pillow raises many types on hostile files (UnidentifiedImageError, OSError,
            # DecompressionBombError for a header claiming gigapixels, SyntaxError,
            # struct.error...): all of them are this file's fault, not the program's.
            raise ValueError(f"imagefolder: {f} is not a readable image "
                             f"({type(exc).__name__})") from None
        x[slot] = arr[None] if channels == 1 else arr.transpose(2, 0, 1)
    a, b = len(train), len(train) + len(val)
    splits = (np.arange(a), np.arange(a, b), np.arange(b, len(order)))
    bundle = make_bundle(f"imagefolder:{root}", x, y[order], num_classes, splits=splits,
                         normalize=request.normalize, divisor=255.0)
    bundle.provenance = {"images": len(order), "classes": len(classes),
                         "sha256": content_digest(classes, y[order], x)}
    return bundle


def content_digest(classes: list[str], y: np.ndarray, x: np.ndarray) -> str:
    """sha256 of a decoded folder: its class names, labels and pixels in split order. Not of
    the files' names, sizes or times: the same images copied elsewhere, or written again,
    train the same model (the training's order is seeded from it)."""
    digest = hashlib.sha256(json.dumps(classes).encode())
    digest.update(np.ascontiguousarray(y, dtype=np.int64).tobytes())
    digest.update(memoryview(np.ascontiguousarray(x)).cast("B"))
    return digest.hexdigest()


def _class_index(root: Path, classes: list[str], labels: str | None) -> dict[str, int]:
    if labels is None:
        if len(classes) < 2:
            raise ValueError(f"imagefolder: {root} needs one sub-folder per class (at least "
                             f"2), found {len(classes)}")
        return {cls: i for i, cls in enumerate(classes)}
    from benchmarks.zoo.inputs import imagenet_class_index
    wnids = imagenet_class_index()
    if not classes:
        raise ValueError(f"imagefolder: {root} needs one sub-folder per ImageNet class id")
    unknown = [cls for cls in classes if cls not in wnids]
    if unknown:
        raise ValueError(f"imagefolder: --labels imagenet needs folders named by ImageNet-1k "
                         f"class ids (n01440764 ...); {unknown[0]!r} under {root} is not one "
                         f"({len(unknown)} of {len(classes)} folders)")
    return {cls: wnids[cls] for cls in classes}


def imagefolder_size(request: DataRequest) -> DataSize:
    """The folder is listed, not read."""
    _, classes, files, shape, _ = _image_files(request.argument, request.input_shape,
                                               request.labels, request.pipeline)
    return DataSize(sum(map(len, files.values())), shape, 1,
                    len(classes) if request.labels is None else IMAGENET_CLASSES)
