"""A causal LM from a local Hugging Face folder (``hf:DIR``): what ``save_pretrained`` writes,
``config.json``, safetensors weights and a fast tokenizer, read offline.

Weights load only from safetensors files (data, never code: pickled ``.bin`` weights are
refused, as checkpoints are elsewhere), no code from the folder runs
(``trust_remote_code=False``), and the hub is never asked (``local_files_only``, offline).
What can be refused without torch is (``check_folder``: the folder, its config, its weights
files), so a run stops before loading anything.
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
