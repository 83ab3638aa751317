"""The timed calls a device's compute peaks are the best of (``benchmarks.measure.peaks``).

A peak is the fastest kernel the variants could run in that precision, not the one a GEMM
benchmark happens to pick (an fp32 convolution can outrun the fp32 matmul): on a Zen 3 ``torch._int_mm`` runs int8 at ~2 GFLOP/s while the
INT8 variants' fbgemm kernels (quantized linear and convolution, through the engine
``optimizers.quantization.select_engine`` picks) run near 150, and autocast's bf16 linear
runs several times faster than a bf16 ``torch.mm``. So each precision lists its candidates
(``candidates``) and the peak is the best of them.

Each kernel is made at a scale ``n``: an n x n x n GEMM, or a 3x3 convolution of n/4
channels on 14x14 maps (batch 4, padded by one), the shape of a ResNet stage. FLOPs count two
per multiply-add, integer ones alike; a convolution's multiply-adds are those of the taps that
touch the input (``optimizers.counting.conv_macs``, as the variants' are counted): the 10% of
taps on its zero padding, which oneDNN skips, had put its fp32 peak above the theoretical one.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import torch

from optimizers.counting import conv_macs

CONV_MAP, CONV_BATCH, CONV_KERNEL, CONV_PADDING = 14, 4, 3, 1


@dataclass(frozen=True)
class Kernel:
    name: str
    flops: Callable[[int], float]                      # FLOPs of one call at scale n
    make: Callable[[torch.device, int], Callable]      # the timed call at scale n
    # Whether it runs under an instruction-set cap (``spec.isa``), so a capped process's roof
    # may be the best of it. Measured at n = 256 on an AVX-512 Zen 4, one thread, native
    # against ONEDNN_MAX_CPU_ISA=SSE41: oneDNN's (the fp32 convolution 0.54 -> 2.94 ms, the bf16
    # ones, torch._int_mm 0.09 -> 0.35) obey it; MKL's fp32 sgemm behind torch.mm (0.33 ->
    # 0.40) and FBGEMM's quantized linear (0.13 -> 0.13) do not. The quantized convolution
    # obeyed it there and did not on a Zen 3 (docs/performance-notes.md): which library runs
    # it is the engine's choice, so it is left out too.
    obeys_cap: bool = True


def _gemm_flops(n: int) -> float:
    return 2.0 * n ** 3


def _conv_channels(n: int) -> int:
    return max(8, n // 4)


def _conv_flops(n: int) -> float:
    c = _conv_channels(n)
    return 2.0 * conv_macs((CONV_BATCH, c, CONV_MAP, CONV_MAP),
                           (c, c, CONV_KERNEL, CONV_KERNEL), padding=CONV_PADDING)


def _randn(*shape, device) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(*shape, generator=g).to(device)


def _mm(dtype: torch.dtype | None) -> Callable:
    def make(device: torch.device, n: int):
        a, b = _randn(n, n, device=device), _randn(n, n, device=device)
        if dtype is not None:
            a, b = a.to(dtype), b.to(dtype)
        return lambda: torch.mm(a, b)
    return make


def _autocast(device: torch.device, dtype: torch.dtype):
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else nullcontext()


def _autocast_linear(device: torch.device, n: int):
    x, w = _randn(n, n, device=device), _randn(n, n, device=device)

    def call():
        with _autocast(device, torch.bfloat16):
            return torch.nn.functional.linear(x, w)
    return call


def _conv(dtype: torch.dtype | None) -> Callable:
    def make(device: torch.device, n: int):
        c = _conv_channels(n)
        x = _randn(CONV_BATCH, c, CONV_MAP, CONV_MAP, device=device)
        w = _randn(c, c, CONV_KERNEL, CONV_KERNEL, device=device)

        def call():
            with _autocast(device, dtype):
                return torch.nn.functional.conv2d(x, w, padding=CONV_PADDING)
        return call
    return make


def _int8_pair(n: int, device: torch.device):
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (n, n), dtype=torch.int8, generator=g).to(device)
    b = torch.randint(-128, 128, (n, n), dtype=torch.int8, generator=g).to(device)
    return a, b


def _int_mm(device: torch.device, n: int):
    if not hasattr(torch, "_int_mm"):
        raise RuntimeError("this torch has no torch._int_mm")
    a, b = _int8_pair(n, device)
    torch._int_mm(a, b)  # raises where the build has no kernel for this device
    return lambda: torch._int_mm(a, b)


def _engine() -> str:
    from optimizers.quantization import select_engine
    return select_engine()


def _quantized_linear(device: torch.device, n: int):
    if device.type != "cpu":
        raise RuntimeError("quantized linear kernels run on the CPU")
    _engine()
    a, b = _int8_pair(n, device)
    x = torch.quantize_per_tensor(a.float(), 1.0, 0, torch.quint8)
    w = torch.quantize_per_tensor(b.float(), 1.0, 0, torch.qint8)
    packed = torch.ops.quantized.linear_prepack(w, None)
    return lambda: torch.ops.quantized.linear(x, packed, 1.0, 0)


def _quantized_conv(device: torch.device, n: int):
    if device.type != "cpu":
        raise RuntimeError("quantized convolution kernels run on the CPU")
    _engine()
    c = _conv_channels(n)
    x = torch.quantize_per_tensor(_randn(CONV_BATCH, c, CONV_MAP, CONV_MAP, device=device),
                                  0.05, 64, torch.quint8)
    w = torch.quantize_per_tensor(_randn(c, c, CONV_KERNEL, CONV_KERNEL, device=device),
                                  0.05, 0, torch.qint8)
    packed = torch.ops.quantized.conv2d_prepack(w, None, [1, 1], [CONV_PADDING] * 2, [1, 1],
                                                1)
    return lambda: torch.ops.quantized.conv2d(x, packed, 1.0, 0)


# Every kernel a precision's roof can be the best of, by the name the precision registry
# (``benchmarks.measure.precisions``) lists it under.
KERNELS = {
    "mm_fp32": Kernel("torch.mm", _gemm_flops, _mm(None), obeys_cap=False),
    "mm_bf16": Kernel("torch.mm", _gemm_flops, _mm(torch.bfloat16)),
    "mm_fp16": Kernel("torch.mm", _gemm_flops, _mm(torch.float16)),
    "int_mm": Kernel("torch._int_mm", _gemm_flops, _int_mm),
    "autocast_linear_bf16": Kernel("linear (autocast bf16)", _gemm_flops, _autocast_linear),
    "autocast_conv_bf16": Kernel("conv2d 3x3 (autocast bf16)", _conv_flops,
                                 _conv(torch.bfloat16)),
    "conv_fp32": Kernel("conv2d 3x3", _conv_flops, _conv(None)),
    "quantized_linear": Kernel("quantized.linear", _gemm_flops, _quantized_linear,
                               obeys_cap=False),
    "quantized_conv": Kernel("quantized.conv2d 3x3", _conv_flops, _quantized_conv,
                             obeys_cap=False),
}


def candidates(device: torch.device, precision: str) -> tuple[Kernel, ...]:
    """The kernels a precision's peak is the best of on ``device``, as its registry entry
    lists them (on a CPU, every kernel family the variants run in it); a ValueError for a
    precision not registered, () where the device does not have it."""
    from benchmarks.measure import precisions
    return tuple(KERNELS[name] for name in precisions.get(precision).kernels_on(device.type))


def first_kernel(device: torch.device, precision: str) -> Kernel:
    """A precision's first kernel on ``device`` (its GEMM), for checking the peaks against
    another timer."""
    found = candidates(device, precision)
    if not found:
        raise RuntimeError(f"{device.type} has no {precision} kernel")
    return found[0]


def kernel_label(kernel: Kernel) -> str:
    """Its name as the card states it: the quantized ones say which engine ran them."""
    if kernel.name.startswith("quantized."):
        return f"{kernel.name} ({_engine()})"
    return kernel.name
