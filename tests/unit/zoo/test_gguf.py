"""The GGUF model's cache entry, proven on tiny-lm (seconds): a model saved as one safetensors
file with its config and tokenizer comes back as the same model, tied weights tied and
rotary buffers rebuilt; a file that is not a GGUF is refused in one line, a broken entry is
not trusted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks.zoo import gguf
from benchmarks.zoo.lm import build_lm


def test_an_entry_round_trips_the_model_config_and_tokenizer(tmp_path):
    lm = build_lm("tiny-lm")
    entry = tmp_path / "lm-gguf-test.safetensors"
    tokenizer_json = json.dumps({"a": "tokenizer"})
    gguf._save(entry, lm.model, tokenizer_json)
    # The tied output layer is stored once.
    from safetensors import safe_open
    with safe_open(str(entry), "pt") as f:
        assert "lm_head.weight" not in set(f.keys())
        assert "quantization_config" not in json.loads(f.metadata()["config"])
    model, tokenizer = gguf._from_entry(entry)
    assert tokenizer == tokenizer_json
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    ids = torch.tensor([lm.tokenizer.encode("def f(x): return x")])
    with torch.inference_mode():
        assert torch.equal(model(input_ids=ids).logits, lm.model(input_ids=ids).logits)


def test_a_file_that_is_not_gguf_is_one_line(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"not a gguf file at all" * 10)
    with pytest.raises(ValueError, match=f"GGUF file {bad} does not load: ") as raised:
        gguf.load_gguf(bad, "0" * 64, tmp_path / "cache")
    assert "\n" not in str(raised.value)
    assert not list(tmp_path.rglob("*.safetensors"))  # nothing cached of a failed load


def test_a_broken_entry_is_rebuilt_not_trusted(tmp_path):
    """A truncated entry is read from the file again, which here is not a GGUF: the file's own
    error, not the entry's garbage."""
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"GGUF")
    sha = "1" * 64
    entry = gguf.entry_path(sha, tmp_path)
    entry.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")  # a header and no tensors
    with pytest.raises(ValueError, match="does not load"):
        gguf.load_gguf(bad, sha, tmp_path)


def test_the_entry_key_names_the_file_and_the_libraries(tmp_path):
    a, b = gguf.entry_path("a" * 64, tmp_path), gguf.entry_path("b" * 64, tmp_path)
    assert a != b and a.parent == Path(tmp_path) and a.name.startswith(gguf.ENTRY_PREFIX)
    assert gguf.entry_path("a" * 64, tmp_path) == a


def test_a_package_not_installed_is_one_line():
    with pytest.raises(ValueError, match="is read from the no-such-package package, which is "
                                         "not installed"):
        gguf.package_file("no-such-package", "x.gguf", "a model")


def test_an_entry_keeps_the_weights_cache_within_its_cap(tmp_path, monkeypatch):
    """The cache's least recently used entries go when an LM entry is written, as they do for
    trained weights; the new entry stays."""
    import os
    monkeypatch.setenv("COMPRESSION_BENCH_CACHE_MB", "16")  # the least the cap may be
    old = tmp_path / "trained.safetensors"
    with open(old, "wb") as f:
        f.truncate(16 * 2**20 - 1000)  # sparse: its size is what counts, not its blocks
    os.utime(old, (1, 1))
    entry = tmp_path / "lm-gguf-test.safetensors"
    gguf._save(entry, build_lm("tiny-lm").model, "{}")
    assert entry.exists() and not old.exists()
