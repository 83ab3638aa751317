"""Peak memory of one forward pass, and the bytes it moves (the roofline's traffic).

Both methods mean the same thing on either device: the variant's weights + its input + the
peak of what its forward allocates on top, whatever else is resident.
"""

from __future__ import annotations

import weakref
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from optimizers.counting import state_tensors

# Both methods mean the same thing: the variant's weights + its input + the peak of what its
# forward pass allocates on top, whatever else is resident (the baseline, other variants, the
# cuBLAS workspace, garbage not yet collected).
CPU_MEMORY_METHOD = "live_tensor_bytes"  # weights + input + peak of tensors alive in a forward
CUDA_MEMORY_METHOD = "cuda_peak_over_resident"  # weights + input + (max allocated - before)


class LiveTensorBytes(TorchDispatchMode):
    """Counts the bytes of every tensor storage an op creates until it is freed, and keeps the
    peak, and the total ever created (every op output once). It sees PyTorch's own allocations
    (tracemalloc does not), at op granularity: a kernel's internal scratch space is not
    counted."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, int] = {}
        self.current = 0
        self.peak = 0
        self.total = 0

    def __enter__(self):
        # Autocast's state reads as off inside __torch_dispatch__: it is taken on entry.
        self.autocast_dtype = torch.get_autocast_dtype("cpu") \
            if torch.is_autocast_enabled("cpu") else None
        return super().__enter__()

    def _free(self, key: int) -> None:
        self.current -= self.live.pop(key, 0)

    def _track(self, t: torch.Tensor) -> None:
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
        key, size = storage.data_ptr(), storage.nbytes()
        if size == 0 or key in self.live:
            return
        self.live[key] = size
        self.current += size
        self.total += size
        self.peak = max(self.peak, self.current)
        weakref.finalize(storage, self._free, key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            out = func(*args, **kwargs)
        except RuntimeError:
            # In inference mode under a dispatch mode, einsum (MaxViT's attention) arrives
            # whole, past CPU autocast, with bf16 and fp32 operands: cast them as autocast
            # does for the matmuls einsum becomes.
            if self.autocast_dtype is None:
                raise
            args, kwargs = tree_map(
                lambda t: t.to(self.autocast_dtype) if isinstance(t, torch.Tensor)
                and t.is_floating_point() else t, (args, kwargs))
            out = func(*args, **kwargs)
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self._track(t)
        return out


def state_bytes(model: nn.Module) -> int:
    """Bytes of the weights and buffers the model holds in memory, as stored: a quantized
    tensor's packed storage, a tensor subclass's inner tensors (torchao's INT8 and INT4
    weights: their integer data, scales and zero points, not the float size they present),
    and a tensor two names share (a language model's tied embedding and head) once."""
    seen: set = set()
    return sum(tensor_bytes(value, seen) for value in state_tensors(model.state_dict()))


def tensor_bytes(value: torch.Tensor, seen: set | None = None) -> int:
    """A tensor's stored bytes (see ``state_bytes``); ``seen`` skips a storage counted
    already."""
    seen = set() if seen is None else seen
    flatten = getattr(value, "__tensor_flatten__", None)
    if flatten is not None:  # a wrapper subclass: what it holds, recursively
        names, _ = flatten()
        return sum(tensor_bytes(inner, seen) for inner in
                   (getattr(value, name, None) for name in names)
                   if isinstance(inner, torch.Tensor))
    if value.is_quantized:
        size = value.untyped_storage().nbytes()
    else:
        size = value.numel() * value.element_size()
    key = (value.untyped_storage().data_ptr(), value.storage_offset(), value.numel(),
           value.dtype) if value.device.type != "meta" else None
    if key is not None and key[0]:
        if key in seen:
            return 0
        seen.add(key)
    return size


class CudaAllocator:
    """The CUDA caching allocator's counters, behind a seam so tests can fake them."""

    def __init__(self, device: torch.device):
        self.device = device

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)

    def reset_peak(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def allocated(self) -> int:
        return int(torch.cuda.memory_allocated(self.device))

    def peak(self) -> int:
        return int(torch.cuda.max_memory_allocated(self.device))


def peak_over_resident(model: nn.Module, x: torch.Tensor, ctx: AbstractContextManager,
                       alloc: CudaAllocator) -> int:
    """Bytes a forward pass allocates above what is resident when it starts."""
    import gc
    with torch.inference_mode(), ctx:
        model(x)  # warm-up: lazily created workspaces are resident from here on
        gc.collect()
        alloc.synchronize()
        before = alloc.allocated()
        alloc.reset_peak()
        model(x)
        alloc.synchronize()
    return max(0, alloc.peak() - before)


def measure_peak_memory(model: nn.Module, example: torch.Tensor, device: torch.device, *,
                        autocast: AbstractContextManager | None = None,
                        allocator: CudaAllocator | None = None) -> tuple[int, str]:
    """Peak bytes of one forward pass of this variant: its weights, its input and the peak of
    what the forward allocates on top, and the method. On CUDA the process-wide peak would
    count whatever else is resident (the baseline stays on the GPU for the whole sweep; the
    cuBLAS workspace is never freed), so the peak is taken over what was allocated just
    before, after a warm-up call has created the workspace and garbage is collected."""
    x = example.to(device)
    ctx = autocast or nullcontext()
    if device.type == "cuda":
        over = peak_over_resident(model, x, ctx, allocator or CudaAllocator(device))
        return state_bytes(model) + x.numel() * x.element_size() + over, CUDA_MEMORY_METHOD
    tracker = LiveTensorBytes()
    with torch.inference_mode(), ctx, tracker:
        model(x)
    return state_bytes(model) + x.numel() * x.element_size() + tracker.peak, CPU_MEMORY_METHOD


def measure_traffic(model: nn.Module, example: torch.Tensor, device: torch.device, *,
                    autocast: AbstractContextManager | None = None) -> int:
    """Bytes one forward of ``example`` moves, at least: the weights read once, the input read
    once, and every op's output written once and read once by the op that consumes it. Fused
    or cached kernels move less, so this is the roofline's conservative (low) intensity."""
    x = example.to(device)
    tracker = LiveTensorBytes()
    with torch.inference_mode(), autocast or nullcontext(), tracker:
        model(x)
    return state_bytes(model) + x.numel() * x.element_size() + 2 * tracker.total
