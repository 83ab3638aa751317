"""A device's measured peaks, the roofs of the roofline (``benchmarks.measure.roofline``).

Compute: the throughput of a short timed square matmul per precision (fp32, bf16 and int8;
fp16 and tf32 on CUDA); int8 through ``torch._int_mm`` where the build has it, else the
quantized linear kernels the INT8 variants run. Memory: a large copy, counted as read plus
write. Each is the median of at least ``MIN_RUNS`` timed calls after a warm-up, on the threads
a sweep is timed with (``pinned_threads``): the same method and threads as a variant's
p50, so a percentage of peak compares like with like.

Measured once per machine: ``cached_peaks`` keeps them in the results store keyed by host,
device, torch version and threads (``ResultsStore.device_peaks``); the worker measures at
start, the CLI on its first run against a store.
"""

from __future__ import annotations

import socket
from contextlib import contextmanager
from datetime import datetime, timezone

import torch

from benchmarks.measure.latency import Clock, CudaClock, LatencyTracker, pinned_threads

# Square GEMM sizes: large enough to reach the kernels' steady state, small enough that a
# whole measurement takes about a second (a CPU runs 1024^3 fp32 multiply-adds in ~10 ms).
GEMM_SIZE = {"cpu": 1024, "cuda": 8192}
# A precision the CPU has no vector unit for (bf16 or int8 without AVX-512 BF16/VNNI, as on a
# Zen 3) runs 1024^3 in seconds, not milliseconds: the size then shrinks, by halves, until one
# call takes at most this long, so measuring every peak stays a matter of seconds.
MAX_CALL_S = 0.05
MIN_GEMM_SIZE = 128
# Copied bytes: far beyond the last-level cache, so the copy streams from memory.
COPY_BYTES = {"cpu": 256 * 2**20, "cuda": 2 * 2**30}
MIN_RUNS = 10
MIN_TIME_S = 0.25
WARMUP = 2
INT8_KERNELS = ("int_mm", "quantized_linear")


def _clock(device: torch.device) -> Clock:
    return CudaClock() if device.type == "cuda" else Clock()


def _median_ms(fn, device: torch.device) -> float:
    tracker = LatencyTracker(min_runs=MIN_RUNS, min_time_s=MIN_TIME_S, warmup=WARMUP,
                                     clock=_clock(device))
    with torch.inference_mode():
        samples = sorted(tracker.run(fn))
    return samples[len(samples) // 2]


def gemm_call(device: torch.device, precision: str, n: int) -> tuple[str, object]:
    """(kernel, the timed call) of one precision's n x n GEMM, for the peaks and for checking
    them against another timer."""
    if precision == "int8":
        return int8_gemm_call(device, n)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(device)
    b = torch.randn(n, n, generator=g).to(device)
    if precision in ("bf16", "fp16"):
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        a, b = a.to(dtype), b.to(dtype)
    return "torch.mm", lambda: torch.mm(a, b)


def int8_gemm_call(device: torch.device, n: int, kernel: str | None = None
                   ) -> tuple[str, object]:
    """int8 x int8 -> int32 GEMM: ``torch._int_mm``, else a quantized linear layer (the
    kernels the INT8 variants run; CPU only). ``kernel`` forces one of INT8_KERNELS."""
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (n, n), dtype=torch.int8, generator=g).to(device)
    b = torch.randint(-128, 128, (n, n), dtype=torch.int8, generator=g).to(device)
    if kernel in (None, "int_mm") and hasattr(torch, "_int_mm"):
        try:
            torch._int_mm(a, b)
            return "torch._int_mm", lambda: torch._int_mm(a, b)
        except RuntimeError:
            if kernel == "int_mm":
                raise
    if device.type != "cpu":
        raise RuntimeError(f"no int8 GEMM kernel on {device}")
    from optimizers.quantization import select_engine
    engine = select_engine()
    x = torch.quantize_per_tensor(a.float(), 1.0, 0, torch.quint8)
    w = torch.quantize_per_tensor(b.float(), 1.0, 0, torch.qint8)
    packed = torch.ops.quantized.linear_prepack(w, None)
    return f"quantized.linear ({engine})", lambda: torch.ops.quantized.linear(x, packed, 1.0, 0)


def gemm_size(device: torch.device, precision: str) -> int:
    """The largest size up to ``GEMM_SIZE`` whose one call takes at most ``MAX_CALL_S``,
    judged from one call at the smallest size (a GEMM's time grows as n^3)."""
    n = MIN_GEMM_SIZE
    _, call = gemm_call(device, precision, n)
    clock = _clock(device)
    with torch.inference_mode():
        call()  # first call: kernel selection, packing
        token = clock.start()
        call()
        ms = clock.stop(token)
        ms = (clock.finish() or [ms])[0]
    seconds = max(ms, 1e-6) / 1e3
    while n * 2 <= GEMM_SIZE[device.type] and seconds * 8 <= MAX_CALL_S:
        n, seconds = n * 2, seconds * 8
    return n


def gemm_flops_per_s(device: torch.device, precision: str, n: int | None = None
                     ) -> tuple[str, float]:
    """(kernel, FLOP/s) of one precision's square GEMM."""
    n = n or gemm_size(device, precision)
    kernel, call = gemm_call(device, precision, n)
    return kernel, 2.0 * n ** 3 / (_median_ms(call, device) / 1e3)


def copy_bytes_per_s(device: torch.device, nbytes: int | None = None) -> float:
    nbytes = nbytes or COPY_BYTES[device.type]
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    return 2.0 * src.nbytes / (_median_ms(lambda: dst.copy_(src), device) / 1e3)


def device_precisions(device: torch.device) -> tuple[str, ...]:
    if device.type == "cuda":
        return ("fp32", "tf32", "bf16", "fp16", "int8")
    return ("fp32", "bf16", "int8")


def measure_peaks(device: torch.device, threads: int) -> dict:
    """Every compute peak of ``device`` and its copy bandwidth, on ``threads`` pinned threads.
    A precision the device cannot run is left out and named in ``unsupported``."""
    gemm, kernels, unsupported = {}, {}, {}
    with pinned_threads(threads):
        for precision in device_precisions(device):
            try:
                with fp32_matmuls(device, "tf32" if precision == "tf32" else "ieee"):
                    kernels[precision], gemm[precision] = gemm_flops_per_s(device, precision)
            except RuntimeError as exc:
                unsupported[precision] = str(exc).splitlines()[0][:200]
        bandwidth = copy_bytes_per_s(device)
    return {
        "device": str(device), "device_name": device_name(device),
        "host": socket.gethostname(), "torch": torch.__version__, "threads": threads,
        "gemm_flops_per_s": gemm, "memory_bytes_per_s": bandwidth, "unsupported": unsupported,
        "method": {"gemm": f"median of >= {MIN_RUNS} timed square matmuls of n x n, n the "
                           f"largest up to {GEMM_SIZE[device.type]} that runs within "
                           f"{MAX_CALL_S * 1e3:g} ms (2n^3 FLOPs each; int8 counts integer "
                           f"multiply-adds alike)",
                   "kernels": kernels,
                   "memory": f"median of timed copies of {COPY_BYTES[device.type] // 2**20} MiB "
                             f"(read + write)"},
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


@contextmanager
def fp32_matmuls(device: torch.device, mode: str):
    """CUDA fp32 matmuls in ``mode`` (ieee or tf32) while one peak is measured, whatever the
    sweep set (``environment.apply_precision``); restored after."""
    matmul = torch.backends.cuda.matmul
    if device.type != "cuda":
        yield
        return
    if hasattr(matmul, "fp32_precision"):  # torch >= 2.9
        before = matmul.fp32_precision
        matmul.fp32_precision = mode
    else:
        before = matmul.allow_tf32
        matmul.allow_tf32 = mode == "tf32"
    try:
        yield
    finally:
        if hasattr(matmul, "fp32_precision"):
            matmul.fp32_precision = before
        else:
            matmul.allow_tf32 = before


def device_name(device: torch.device) -> str:
    from benchmarks.measure.environment import cpu_name
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()


def peaks_key(device: torch.device, threads: int) -> dict:
    """What a device's peaks are cached under: the same machine, device, torch and threads."""
    return {"host": socket.gethostname(), "device": str(device), "device_name": device_name(device),
            "torch": torch.__version__, "threads": int(threads)}


def cached_peaks(store, device: torch.device, threads: int) -> dict:
    """The peaks of ``device`` from the store, measured and stored the first time."""
    key = peaks_key(device, threads)
    peaks = store.device_peaks(key)
    if peaks is None:
        peaks = measure_peaks(device, threads)
        store.save_device_peaks(key, peaks)
    return peaks


def sweep_peaks(store, device: torch.device, threads: int) -> dict:
    """The environment card's ``peaks``: the sweep's device, and the CPU, where the INT8
    variants of a GPU sweep run. Without a store (a cluster's timing node) they are measured
    afresh."""
    devices = [device] + ([torch.device("cpu")] if device.type != "cpu" else [])
    if store is None:
        return {str(d): measure_peaks(d, threads) for d in devices}
    return {str(d): cached_peaks(store, d, threads) for d in devices}
