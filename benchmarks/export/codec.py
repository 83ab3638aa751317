"""Any state dict as plain tensors for safetensors, INT8 included, and back.

Quantized tensors become their integer values plus scales and zero points; the tuples and
dtypes of packed INT8 parameters, and each module's state version (a quantized layer reads
its packed weights by it), travel in a JSON ``layout`` beside the tensors.
"""

from __future__ import annotations


def encode_state(state: dict) -> tuple[dict, dict]:
    """(tensors, layout): a state dict as plain tensors for safetensors, and how to put it
    back. Quantized tensors become their integer values plus scales and zero points; the
    tuples and dtypes of packed INT8 parameters are described in the layout."""
    tensors: dict = {}
    entries = {key: _encode(key, value, tensors) for key, value in state.items()}
    # Each module's state version: a quantized layer reads its packed weights by it.
    versions = {k: dict(v) for k, v in getattr(state, "_metadata", {}).items()}
    return tensors, {"entries": entries, "module_metadata": versions}


def _encode(key: str, value, tensors: dict) -> dict:
    import torch
    if value is None:
        return {"kind": "none"}
    if isinstance(value, torch.dtype):
        return {"kind": "dtype", "value": str(value).removeprefix("torch.")}
    if isinstance(value, (tuple, list)):
        return {"kind": "tuple", "items": [_encode(f"{key}/{i}", v, tensors)
                                           for i, v in enumerate(value)]}
    if not isinstance(value, torch.Tensor):
        raise RuntimeError(f"state {key} holds a {type(value).__name__}, not a tensor")
    value = value.detach().cpu()
    if not value.is_quantized:
        tensors[key] = value.clone().contiguous()
        return {"kind": "tensor"}
    tensors[key] = value.int_repr().clone().contiguous()
    dtype = str(value.dtype).removeprefix("torch.")
    if value.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        return {"kind": "quantized", "dtype": dtype, "scale": value.q_scale(),
                "zero_point": value.q_zero_point()}
    tensors[f"{key}/scales"] = value.q_per_channel_scales().clone().contiguous()
    tensors[f"{key}/zero_points"] = value.q_per_channel_zero_points().clone().contiguous()
    return {"kind": "quantized", "dtype": dtype, "axis": value.q_per_channel_axis()}


def decode_state(tensors: dict, layout: dict) -> dict:
    from collections import OrderedDict
    state = OrderedDict((key, _decode(key, entry, tensors))
                        for key, entry in layout["entries"].items())
    state._metadata = OrderedDict(layout["module_metadata"])
    return state


def _decode(key: str, entry: dict, tensors: dict):
    import torch
    kind = entry["kind"]
    if kind == "none":
        return None
    if kind == "dtype":
        return getattr(torch, entry["value"])
    if kind == "tuple":
        return tuple(_decode(f"{key}/{i}", e, tensors) for i, e in enumerate(entry["items"]))
    if kind == "tensor":
        return tensors[key]
    ints = tensors[key]
    dtype = getattr(torch, entry["dtype"])
    if "axis" in entry:
        return torch._make_per_channel_quantized_tensor(
            ints, tensors[f"{key}/scales"], tensors[f"{key}/zero_points"], entry["axis"])
    q = torch._make_per_tensor_quantized_tensor(ints, entry["scale"], entry["zero_point"])
    return q if q.dtype == dtype else torch.quantize_per_tensor(
        q.dequantize(), entry["scale"], entry["zero_point"], dtype)
