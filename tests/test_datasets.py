import numpy as np
import torch

from benchmarks.datasets import load_dataset


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
