"""A causal LM from a local Hugging Face folder (``hf:DIR``): what ``save_pretrained`` writes,
``config.json``, safetensors weights and a fast tokenizer, read offline.

Weights load only from safetensors files (data, never code: pickled ``.bin`` weights are
refused, as checkpoints are elsewhere), no code from the folder runs
(``trust_remote_code=False``), and the hub is never asked (``local_files_only``, offline).
What can be refused without torch is (``check_folder``: the folder, its config, its weights
files, the sizes of the files read whole), so a run stops before loading anything; and the
model's size is known from its config before torch builds it (``parameter_count``), so a
config of absurd sizes is refused by the admission estimate, not found by the allocator.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from optimizers.errors import first_line

if TYPE_CHECKING:
    from benchmarks.zoo.lm import LanguageModel

HF_PREFIX = "hf:"
# Files read whole, capped before they are opened: a config is a few KB and a tokenizer's
# files a few MB, where a 300 MB one read whole takes far more as Python objects.
MAX_CONFIG_BYTES = 1 * 2**20
MAX_TOKENIZER_BYTES = 50 * 2**20
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "added_tokens.json", "vocab.json", "vocab.txt", "merges.txt",
                   "tokenizer.model", "spiece.model", "chat_template.jinja",
                   "generation_config.json")
# A config's sizes under the names the common architectures give them (Llama, Mistral, Qwen,
# Phi: the first; GPT-2: n_*; OPT, BART: d_model, ffn_dim).
SIZE_NAMES = {"vocab": ("vocab_size",), "hidden": ("hidden_size", "n_embd", "d_model"),
              "layers": ("num_hidden_layers", "n_layer", "num_layers"),
              "heads": ("num_attention_heads", "n_head"),
              "intermediate": ("intermediate_size", "n_inner", "ffn_dim")}


def folder_of(spec: str) -> Path:
    return Path(spec[len(HF_PREFIX):]).expanduser()


def check_folder(spec: str) -> dict:
    """The folder's config (torch-free); one line when it cannot hold a causal LM."""
    folder = folder_of(spec)
    if not spec[len(HF_PREFIX):].strip():
        raise ValueError("hf:DIR needs its DIR: a folder save_pretrained wrote")
    if not folder.is_dir():
        raise ValueError(f"model folder {folder} does not exist")
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise ValueError(f"model folder {folder} is not a Hugging Face model folder "
                         f"(no config.json)")
    _check_size(config_file, MAX_CONFIG_BYTES)
    for name in TOKENIZER_FILES:
        if (folder / name).is_file():
            _check_size(folder / name, MAX_TOKENIZER_BYTES)
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"model folder {folder}: config.json is not JSON "
                         f"({first_line(exc)})") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise ValueError(f"model folder {folder}: config.json names no model_type")
    if not list(folder.glob("*.safetensors")):
        pickled = [p.name for p in folder.glob("*.bin")]
        found = f" (it has {', '.join(pickled[:3])}: pickled weights are not read)" \
            if pickled else ""
        raise ValueError(f"model folder {folder} has no safetensors weights{found}")
    return config


def _check_size(path: Path, cap: int) -> None:
    size = path.stat().st_size
    if size > cap:
        raise ValueError(f"model folder {path.parent}: {path.name} is {size / 2**20:,.1f} MB; "
                         f"at most {cap / 2**20:g} MB of it are read (a real one is far "
                         f"smaller)")


def _size(config: dict, what: str, default: int | None = None) -> int:
    value = next((config[n] for n in SIZE_NAMES[what] if config.get(n) is not None), default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        names = " or ".join(SIZE_NAMES[what])
        raise ValueError(f"config.json gives no usable {names} ({value!r}): the model's "
                         f"memory cannot be estimated before it is built")
    return value


def parameter_count(config: dict) -> int:
    """The parameters a decoder of this config holds, from its sizes (torch-free): the
    embedding and, untied, the output layer (vocabulary x hidden); per layer the attention's
    projections (grouped key/value heads counted as such) and a gated MLP's three matrices
    (a plain MLP has two: the estimate stays on the safe side), two norms; a final norm.
    Exact for Llama-style configs; a ValueError naming the size it lacks."""
    vocab, hidden = _size(config, "vocab"), _size(config, "hidden")
    layers, heads = _size(config, "layers"), _size(config, "heads")
    intermediate = _size(config, "intermediate", 4 * hidden)
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or hidden // heads
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
               for v in (kv_heads, head_dim)):
        raise ValueError(f"config.json gives no usable num_key_value_heads or head_dim "
                         f"({kv_heads!r}, {head_dim!r})")
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    per_layer = attention + 3 * hidden * intermediate + 2 * hidden
    tied = config.get("tie_word_embeddings") is True  # unsaid: untied, the larger
    return vocab * hidden * (1 if tied else 2) + layers * per_layer + hidden


def folder_parameters(spec: str) -> int:
    """``parameter_count`` of the folder's config (checked first, torch-free)."""
    try:
        return parameter_count(check_folder(spec))
    except ValueError as exc:
        if str(exc).startswith("model folder"):
            raise
        raise ValueError(f"model folder {folder_of(spec)}: {exc}") from None


def folder_context(spec: str) -> int:
    """The most tokens the folder's model may see, from its config."""
    config = check_folder(spec)
    context = config.get("max_position_embeddings") or config.get("n_positions")
    if not isinstance(context, int) or context < 2:
        raise ValueError(f"model folder {folder_of(spec)}: its config gives no context length "
                         f"(max_position_embeddings)")
    return context


def folder_digest(spec: str) -> str:
    """What names the folder's model in cache keys: its config and its weights files' names
    and sizes (hashing gigabytes of weights at every start would cost more than it saves)."""
    folder = folder_of(spec)
    digest = hashlib.sha256((folder / "config.json").read_bytes())
    for path in sorted(folder.glob("*.safetensors")):
        digest.update(f"{path.name}:{path.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def load_folder(spec: str) -> LanguageModel:
    from benchmarks.zoo.gguf import hub_offline
    from benchmarks.zoo.lm import LanguageModel
    from benchmarks.zoo.tokens import JsonTokenizer
    context = folder_context(spec)
    folder = folder_of(spec)
    from transformers import AutoModelForCausalLM, AutoTokenizer
    try:
        with hub_offline():
            model = AutoModelForCausalLM.from_pretrained(
                str(folder), local_files_only=True, use_safetensors=True,
                trust_remote_code=False, dtype="float32")
            tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True,
                                                      trust_remote_code=False)
    except Exception as exc:  # whatever the folder holds is the user's input
        raise ValueError(f"model folder {folder} does not load: {type(exc).__name__}: "
                         f"{first_line(exc)}") from None
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(f"model folder {folder}: its tokenizer has no fast (tokenizer.json) "
                         f"form")
    tokens = JsonTokenizer(backend.to_str(), f"{folder.name} (tokenizer.json)")
    card = {"source": f"Hugging Face folder {folder.resolve()}", "digest": folder_digest(spec),
            "architecture": model.config.model_type, "dtype": "float32",
            "parameters": sum(p.numel() for p in model.parameters()),
            "tokenizer": tokens.card()}
    return LanguageModel(spec, model.eval(), tokens, context, card)
