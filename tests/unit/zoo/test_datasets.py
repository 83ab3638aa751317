import numpy as np
import torch

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
    import pytest
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
