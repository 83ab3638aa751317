"""Checkpoints are data, never code.

``.safetensors`` files are read by the safetensors library (a JSON header and raw tensors:
nothing to execute); ``.pt``/``.pth`` state dicts go through ``torch.load(weights_only=True)``,
whose unpickler refuses every global outside a small allow-list of tensor types, so a pickle
that would run code is rejected before any of it runs.
"""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import torch
from torch import nn

CHECKPOINT_SUFFIXES = (".safetensors", ".pt", ".pth")
# A header larger than this is a hostile or broken file, not a model (safetensors' own cap is
# 100 MB; real headers are kilobytes).
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024
MISMATCHES_SHOWN = 3


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    path = Path(path).expanduser()
    if path.suffix.lower() not in CHECKPOINT_SUFFIXES:
        raise ValueError(f"checkpoint {path.name}: accepted formats are "
                         f"{', '.join(CHECKPOINT_SUFFIXES)}")
    if not path.is_file():
        raise ValueError(f"checkpoint {path} does not exist")
    if path.suffix.lower() == ".safetensors":
        return _read_safetensors(path)
    return _read_torch(path)


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
    if len(head) < 8:
        raise ValueError(f"checkpoint {path.name} is truncated (no safetensors header)")
    header_len = int.from_bytes(head, "little")
    if header_len > size - 8:
        raise ValueError(f"checkpoint {path.name} is corrupt or truncated: its header claims "
                         f"{header_len:,} bytes, but only {size - 8:,} follow the 8-byte "
                         f"length ({size:,}-byte file)")
    if header_len > MAX_SAFETENSORS_HEADER:
        raise ValueError(f"checkpoint {path.name} is refused: its header is {header_len:,} "
                         f"bytes, above the {MAX_SAFETENSORS_HEADER // 2**20} MiB a model's "
                         f"header may take (real ones are kilobytes)")
    try:
        return load_file(str(path))
    except (SafetensorError, Exception) as exc:  # noqa: BLE001 (any failure is the file's)
        raise ValueError(f"checkpoint {path.name} is corrupt or truncated (safetensors: "
                         f"{str(exc).splitlines()[0][:200]})") from None


def _read_torch(path: Path) -> dict[str, torch.Tensor]:
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        # weights_only refuses globals such as os.system before they are resolved; say which.
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        code = next((ln for ln in lines if "GLOBAL" in ln or "global" in ln.lower()), None)
        if code is not None:
            raise ValueError(f"checkpoint {path.name} carries pickled code, which is refused "
                             f"(only tensors are loaded): {code[:200]}") from None
        detail = lines[-2] if len(lines) >= 2 else (lines[0] if lines else "unreadable")
        if not zipfile.is_zipfile(path):
            # A legacy (non-zip) pickle the safe unpickler cannot read: garbage, or objects
            # other than tensors. Either way it is refused without running anything.
            raise ValueError(f"checkpoint {path.name} is refused: corrupt, or a legacy pickle "
                             f"that holds more than plain tensors ({detail[:120]})") from None
        raise ValueError(f"checkpoint {path.name} is corrupt: {detail[:200]}") from None
    except Exception as exc:  # noqa: BLE001
        # The unpickler fails on garbage with many types (EOFError, BadZipFile, struct.error
        # for a file that is the single byte "G", OverflowError, RecursionError...): all of
        # them mean this file is broken, never that the program is.
        msg = str(exc).strip().splitlines()
        raise ValueError(f"checkpoint {path.name} is corrupt or truncated: "
                         f"{(msg[0] if msg else type(exc).__name__)[:200]}") from None
    if isinstance(obj, dict) and "state_dict" in obj and isinstance(obj["state_dict"], dict):
        obj = obj["state_dict"]
    if not isinstance(obj, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()):
        raise ValueError(f"checkpoint {path.name} is not a state_dict (a dict of tensors)")
    return obj


def load_into(model: nn.Module, state: dict[str, torch.Tensor], name: str) -> None:
    """Strict load; a mismatch names the first differing keys and shapes."""
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    shapes = [f"{k} {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
              for k in own if k in state and tuple(state[k].shape) != tuple(own[k].shape)]
    # Copying complex values into a real parameter silently drops the imaginary part.
    dtypes = [f"{k} {state[k].dtype} vs model {own[k].dtype}" for k in own
              if k in state and state[k].is_complex() and not own[k].is_complex()]
    problems = []
    if dtypes:
        problems.append("dtype mismatch: " + "; ".join(dtypes[:MISMATCHES_SHOWN]))
    if shapes:
        problems.append("shape mismatch: " + "; ".join(shapes[:MISMATCHES_SHOWN]))
    if missing:
        problems.append("missing keys: " + ", ".join(missing[:MISMATCHES_SHOWN]))
    if unexpected:
        problems.append("unexpected keys: " + ", ".join(unexpected[:MISMATCHES_SHOWN]))
    if problems:
        raise ValueError(f"checkpoint {name} does not match the model ({'; '.join(problems)})")
    try:
        model.load_state_dict(state, strict=True)
    except (RuntimeError, TypeError, ValueError) as exc:
        # Keys and shapes match, but a value cannot be copied in (a complex or otherwise
        # unusable dtype): the checkpoint's fault, reported like any other mismatch.
        text = str(exc).strip().splitlines()
        raise ValueError(f"checkpoint {name} does not match the model "
                         f"({(text[-1] if text else type(exc).__name__).strip()[:200]})") from None


def save_state_dict(model: nn.Module, path: str | Path) -> None:
    from safetensors.torch import save_file
    # clone: safetensors refuses tensors that share storage (views, tied weights).
    state = {k: v.detach().cpu().clone().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(path))
