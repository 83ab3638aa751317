"""Which kernels one forward ran, read from oneDNN's verbose log: whether a cell timed under
an instruction-set cap obeyed it (``benchmarks.run.profiles``).

oneDNN prints a line per primitive it executes (``torch.backends.mkldnn.verbose``), naming
its implementation (``brg_conv_fwd:avx512_core_vnni``, ``jit_uni_int8:avx2``, ``gemm:jit``),
its data types and its shape; it writes from C, so the log is read from file descriptor 1.
A kernel outside oneDNN prints nothing: FBGEMM's quantized linears (and convolutions, where
PyTorch's x86 engine gives them to it), MKL's float matmuls; they dispatch on the CPU's own
flags whatever the cap. Each convolution, inner product and matmul in the log has its
multiply-adds taken from its shape and is matched to the model's convolution or linear layer
of the same count (``macs.layers_run``): a layer obeyed the cap when a oneDNN kernel at or
below it ran it; one that no oneDNN primitive ran is named as outside.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import tempfile
from collections import Counter
from contextlib import nullcontext
from math import prod

import torch

from benchmarks.measure.macs import layers_run
from benchmarks.spec.isa import onednn_obeys

COMPUTE = ("convolution", "inner_product", "matmul")
INT8 = ("u8", "s8")
HOW = ("oneDNN's verbose log over one forward: each convolution, inner product and matmul "
       "matched by its multiply-adds to the model's layer")
_DIMS = re.compile(r"(g|mb|ic|oc|id|ih|iw|od|oh|ow|kd|kh|kw)(\d+)")


def onednn_log(call) -> str:
    """What oneDNN printed while ``call()`` ran with its verbose log on."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        try:
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                call()
        finally:
            sys.stdout.flush()
            try:  # oneDNN flushes each line; C's buffer flushed anyway, before fd 1 returns
                ctypes.CDLL(None).fflush(None)
            except (OSError, AttributeError):
                pass
            os.dup2(saved, 1)
            os.close(saved)
        sink.seek(0)
        return sink.read().decode(errors="replace")


def primitive_macs(kind: str, shape: str) -> int:
    """A oneDNN primitive's multiply-adds from its verbose shape (``g2mb32_ic4oc64_ih8oh6kh3
    ...``, ``mb32ic2048oc10``, ``32x2048:2048x10``); 0 where it cannot be read."""
    try:
        if kind == "matmul":
            src, wei = shape.split(":")[:2]
            return prod(int(d) for d in src.split("x")) * int(wei.split("x")[-1])
        dims = {k: int(v) for k, v in _DIMS.findall(shape)}
        if kind == "inner_product":
            return dims["mb"] * dims["oc"] * dims["ic"] * prod(
                dims.get(k, 1) for k in ("id", "ih", "iw"))
        return dims["mb"] * dims["oc"] * (dims["ic"] // dims.get("g", 1)) * prod(
            dims.get(k, 1) for k in ("od", "oh", "ow", "kd", "kh", "kw"))
    except (KeyError, ValueError):
        return 0


def primitives(log: str) -> list[dict]:
    """The convolutions, inner products and matmuls a verbose log says were executed:
    [{"kind", "implementation", "dtype": its source's, "macs"}]."""
    out = []
    for line in log.splitlines():
        fields = line.strip().split(",")
        if not fields[0].endswith("_verbose") or "exec" not in fields:
            continue
        at = fields.index("exec")
        if at + 5 >= len(fields) or fields[at + 2] not in COMPUTE:
            continue
        kind, implementation = fields[at + 2], fields[at + 3]
        src = next((t.split(":") for t in fields[at + 5].split() if t.startswith("src")), [])
        dtype = src[1] if len(src) > 1 else "?"
        out.append({"kind": kind, "implementation": implementation,
                    "dtype": "int8" if dtype in INT8 else dtype,
                    "macs": primitive_macs(kind, fields[-2])})
    return out


def census(fn, model: torch.nn.Module, example: torch.Tensor, rank: int,
           autocast_dtype: torch.dtype | None = None) -> dict:
    """Which kernels one forward of ``fn`` (the cell as it is timed: eager or compiled) ran
    for the convolution and linear layers of ``model`` (its eager module), against a cap of
    ``rank`` (``isa.cap_rank``): {"obey": the share of the layers' multiply-adds run by oneDNN
    kernels at or below the cap, "macs": the layers', "primitives": {dtype: executions},
    "isa": the implementations, "above_cap": any above it, "outside": the layers no oneDNN
    primitive ran, "how"}; {"obey": None, "why"} where it cannot be read."""
    layers = layers_run(model, example, autocast_dtype=autocast_dtype)
    if not layers:
        return {"obey": None, "how": HOW, "why": "no convolution or linear layer to weigh its "
                                                 "kernels against"}
    autocast = (torch.autocast(example.device.type, dtype=autocast_dtype)
                if autocast_dtype is not None else nullcontext())
    try:
        with torch.inference_mode(), autocast:
            fn(example)  # warm: primitives created (a graph compiled) before the one read
            log = onednn_log(lambda: fn(example))
    except Exception as exc:  # the census decides a label: a cell it cannot read is not one
        return {"obey": None, "how": HOW, "why": f"oneDNN's log could not be read: "
                                                 f"{type(exc).__name__}: {exc}"[:300]}
    ran = primitives(log)
    sizes = Counter(p["macs"] for p in ran if p["macs"])
    obeying = Counter(p["macs"] for p in ran if p["macs"] and
                      onednn_obeys(p["implementation"], rank))
    obeyed, outside = 0, []
    for layer in layers:
        if obeying[layer["macs"]]:
            obeying[layer["macs"]] -= 1
            sizes[layer["macs"]] -= 1
            obeyed += layer["macs"]
        elif sizes[layer["macs"]]:  # a oneDNN kernel above the cap ran it
            sizes[layer["macs"]] -= 1
        else:
            outside.append(f"{layer['layer']} ({layer['type']}, {layer['precision']})")
    total = sum(layer["macs"] for layer in layers)
    return {"obey": round(obeyed / total, 4), "macs": total,
            "primitives": dict(Counter(p["dtype"] for p in ran)),
            "isa": sorted({p["implementation"] for p in ran}),
            "above_cap": sorted({p["implementation"] for p in ran
                                 if not onednn_obeys(p["implementation"], rank)}),
            "outside": outside, "how": HOW}

