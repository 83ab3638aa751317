"""An export folder read back: the model rebuilt from ``model.safetensors`` and the
architecture in its metadata, or the ``torch.export`` program."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from benchmarks.export.codec import decode_state
from benchmarks.export.files import CARD_NAME, PT2_NAME, WEIGHTS_NAME
from benchmarks.export.rebuild import build_architecture


def run_model(model, x, device, autocast):
    import torch

    from optimizers.precision import autocast as autocast_ctx
    with torch.inference_mode(), autocast_ctx(device.type, autocast):
        return model(x.to(device))


@dataclass
class Loaded:
    model: object
    autocast: str | None
    device: object
    card: dict

    def __call__(self, x):
        """Logits for a batch of normalised inputs, under the variant's autocast."""
        return run_model(self.model, x, self.device, self.autocast).float()


def load_exported(folder: str | Path, device: str = "cpu") -> Loaded:
    """The model of an export folder, rebuilt from ``model.safetensors`` and the architecture
    in its metadata (the zoo, or the copied factory file). INT8 models run on the CPU."""
    import torch
    from safetensors import safe_open
    folder = Path(folder)
    path = folder / WEIGHTS_NAME
    if not path.is_file():
        raise ValueError(f"{folder} holds no {WEIGHTS_NAME}; export a variant there first")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    arch = json.loads(meta["architecture"])
    model = build_architecture(arch, folder)
    model.load_state_dict(decode_state(tensors, json.loads(meta["layout"])), strict=True)
    card_path = folder / CARD_NAME
    card = json.loads(card_path.read_text()) if card_path.is_file() else {}
    # INT8 kernels run on the CPU (exports written before ``cpu_only`` say so by "int8").
    device = torch.device("cpu" if arch.get("cpu_only", bool(arch.get("int8"))) else device)
    return Loaded(model=model.to(device).eval(), autocast=arch.get("autocast"), device=device,
                  card=card)


# torchao's pt2e INT8 graphs call these ops; torch registers them only once this is imported.
PT2E_OPS_MODULE = "torch.ao.quantization.fx._decomposed"


def load_program(folder: str | Path):
    """The export folder's ExportedProgram as a callable module (``torch.export.load``, with
    the quantize/dequantize ops a pt2e INT8 graph calls registered first)."""
    import importlib

    import torch
    importlib.import_module(PT2E_OPS_MODULE)
    return torch.export.load(str(Path(folder) / PT2_NAME)).module()
