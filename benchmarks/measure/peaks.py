"""A device's measured peaks, the roofs of the roofline (``benchmarks.measure.roofline``).

Compute: per precision the device has (``benchmarks.measure.precisions``: fp32, bf16 and
int8; tf32 and fp16 on CUDA), the best of the kernels its registry entry lists, the ones the
variants run in it (``benchmarks.measure.kernels``: ``torch.mm``; on a CPU also autocast's
bf16 linear and convolution, the quantized engine's int8 linear and convolution beside
``torch._int_mm``). Memory: a large copy, counted as read plus write. A peak is a maximum,
not a median: each call is timed in ``BEST_OF`` windows and the fastest window's median is
its figure, so one preemption spoils a window, not the roof (a 1024^3 GEMM runs 22-45 ms on
a busy machine and caught every preemption of a single median, while a 1 ms variant's median
dodged them: the baseline then stood at 170% of its "peak"). Timed on the threads a sweep is
timed with (``pinned_threads``).

Beside them, the theoretical peaks (``benchmarks.measure.theory``: cores x clock x FLOP/cycle
of the CPU's instruction set, at the clock a core was measured to sustain, ``clock``, stored
with the peaks beside the stated one; a GPU's data sheet). Measured once per machine:
``cached_peaks`` keeps them in the results store keyed by host, device, torch version and
threads (``ResultsStore.device_peaks``) and beside the weights cache (``machine_peaks``: a
new store reads them there), and measures them again (``stale_reason``) when they
are older than ``MAX_AGE_DAYS``, were measured by an older method (``OLDER_METHODS``), or a
precision the device has instructions for sits below ``PLAUSIBLE_FRACTION`` of its
theoretical peak. A precision still that low after measuring it again with more windows is
believed: the best kernel torch has for it reaches no more here (AMX's bf16 and int8 tiles
through oneDNN and fbgemm at these shapes reach a third of the tiles' rate on a Sapphire
Rapids, however quiet the machine), recorded in ``kernel_limited`` and not measured again at
every run. After a sweep is timed, a precision some variant ran above is measured again with
more windows (``remeasure``, called by ``benchmarks.run.roofs``); every re-measurement is
logged in the peaks' ``remeasured`` list. A peak is the best each kernel was seen to do: the
candidates' figures are kept at their maxima across measurements, so the peak is always the
best of the candidates stored beside it.

A process under an instruction-set cap (``benchmarks.spec.isa``: a profile's preview) has roofs
of its own, kept under a key that names the cap: the best of the kernels that obey it, and the
theoretical peaks of the instruction sets it leaves.
"""

from __future__ import annotations

import math
import socket
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import torch

from benchmarks.measure import kernels as k
from benchmarks.measure import machine_peaks
from benchmarks.measure import precisions
from benchmarks.measure.peak_records import (
    best_candidates,
    best_of,
    faster_clock,
    logged,
    merged,
)
from benchmarks.measure.clock import sustained_clock_ghz
from benchmarks.measure.latency import Clock, CudaClock, LatencyTracker, pinned_threads
from benchmarks.measure.theory import theoretical
from benchmarks.spec.isa import CAP_VARIABLE, process_cap

# The largest kernel scale: big enough for the kernels' steady state, small enough that a
# whole measurement takes seconds (a CPU runs 1024^3 fp32 multiply-adds in ~10-20 ms).
GEMM_SIZE = {"cpu": 1024, "cuda": 8192}
# A precision the CPU has no vector unit for (bf16 without AVX512_BF16, as on a Zen 3) runs
# 1024^3 in seconds, not milliseconds: the scale then shrinks, by halves, until one call takes
# at most this long, so measuring every peak stays a matter of seconds.
MAX_CALL_S = 0.05
MIN_GEMM_SIZE = 128
# Copied bytes: beyond the last-level cache (32 MiB on a Zen 3 EPYC, up to 4x that on the
# largest parts counted per copy's read and write), so the copy streams from memory.
COPY_BYTES = {"cpu": 128 * 2**20, "cuda": 2 * 2**30}
# Each kernel: BEST_OF windows of at least WINDOW_RUNS calls and WINDOW_S seconds; a peak
# measured again after a variant ran above it takes REMEASURE_BEST_OF windows. One that read
# implausibly low at its first measurement is measured again at once with BEST_OF windows
# more: each kernel keeps its better figure, so it is the best of six windows taken at two
# moments (on an AMX Xeon, where bf16 and int8 always read low, six more had made a new
# machine's first run 3.9 s longer, twice the measurement itself).
BEST_OF = 3
REMEASURE_BEST_OF = 6
WINDOW_RUNS = 5
WINDOW_S = 0.1
WARMUP = 2
# Stored peaks are measured again when older than this (a driver, BIOS or VM change keeps the
# host name) ...
MAX_AGE_DAYS = 30
# ... or when a precision the device has instructions for is below this fraction of its
# theoretical peak (a quiet machine's MKL GEMM reaches ~70-90% of it, fbgemm's int8 ~95%;
# one measured beside other jobs reached 40%), at most once per RETRY_HOURS while it stays so.
PLAUSIBLE_FRACTION = 0.5
RETRY_HOURS = 1.0
METHOD_VERSION = 3
# What each older method got wrong: its peaks are measured again, none of its figures kept.
OLDER_METHODS = {1: "took one median and torch._int_mm for int8",
                 2: "counted the convolution kernels' taps on the zero padding (10% too many "
                    "FLOPs)"}


def _clock(device: torch.device) -> Clock:
    return CudaClock() if device.type == "cuda" else Clock()


def best_median_ms(fn, device: torch.device, windows: int = BEST_OF) -> float:
    """The fastest of ``windows`` medians of timed calls of ``fn``."""
    best = math.inf
    with torch.inference_mode():
        for i in range(windows):
            tracker = LatencyTracker(min_runs=WINDOW_RUNS, min_time_s=WINDOW_S,
                                     warmup=WARMUP if i == 0 else 0, clock=_clock(device))
            samples = sorted(tracker.run(fn))
            best = min(best, samples[len(samples) // 2])
    return best


def kernel_scale(device: torch.device, kernel: k.Kernel) -> int:
    """The largest scale up to ``GEMM_SIZE`` whose one call takes at most ``MAX_CALL_S``,
    judged from one call at the smallest scale (time grows as the FLOPs do)."""
    n = MIN_GEMM_SIZE
    call = kernel.make(device, n)
    clock = _clock(device)
    with torch.inference_mode():
        call()  # first call: kernel selection, packing
        token = clock.start()
        call()
        ms = clock.stop(token)
        ms = (clock.finish() or [ms])[0]
    seconds = max(ms, 1e-6) / 1e3
    while n * 2 <= GEMM_SIZE[device.type]:
        grown = seconds * kernel.flops(n * 2) / kernel.flops(n)
        if grown > MAX_CALL_S:
            break
        n, seconds = n * 2, grown
    return n


def kernel_flops_per_s(device: torch.device, kernel: k.Kernel, windows: int = BEST_OF,
                       n: int | None = None) -> float:
    n = n or kernel_scale(device, kernel)
    return kernel.flops(n) / (best_median_ms(kernel.make(device, n), device, windows) / 1e3)


def gemm_call(device: torch.device, precision: str, n: int) -> tuple[str, object]:
    """(kernel, the timed call) of one precision's n x n ``torch.mm`` (``torch._int_mm`` for
    int8), for checking the peaks against another timer."""
    kernel = k.first_kernel(device, precision)
    return kernel.name, kernel.make(device, n)


def precision_peak(device: torch.device, precision: str, windows: int = BEST_OF
                   ) -> tuple[str, float, dict]:
    """(best kernel, its FLOP/s, every candidate's FLOP/s or why it could not run); a
    RuntimeError naming the first reason when none could run. In a process under an
    instruction-set cap, only the candidates that obey it (``Kernel.obeys_cap``)."""
    rates, reasons = {}, {}
    cap = process_cap() if device.type == "cpu" else None
    with fp32_matmuls(device, precisions.get(precision).matmul_mode):
        for kernel in k.candidates(device, precision):
            if cap and not kernel.obeys_cap:
                reasons[kernel.name] = (f"dispatches on the CPU's own flags, not under "
                                        f"{CAP_VARIABLE}={cap}: no capped roof is its")
                continue
            try:
                rates[k.kernel_label(kernel)] = kernel_flops_per_s(device, kernel, windows)
            except RuntimeError as exc:
                reasons[kernel.name] = str(exc).splitlines()[0][:200]
    if not rates:
        raise RuntimeError(next(iter(reasons.values()), f"no {precision} kernel"))
    best = max(rates, key=rates.get)
    return best, rates[best], {**rates, **reasons}


def copy_bytes_per_s(device: torch.device, nbytes: int | None = None,
                     windows: int = BEST_OF) -> float:
    nbytes = nbytes or COPY_BYTES[device.type]
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    return 2.0 * src.nbytes / (best_median_ms(lambda: dst.copy_(src), device, windows) / 1e3)


def device_precisions(device: torch.device) -> tuple[str, ...]:
    """The precisions ``device`` has a roof for, from the precision registry."""
    return precisions.on_device(device.type)


def measure_clock(device: torch.device) -> dict | None:
    """The clock a CPU core sustains (``measure.clock``) beside the stated one; None on a GPU
    (its theoretical peaks come from its data sheet)."""
    if device.type != "cpu":
        return None
    ghz, how = sustained_clock_ghz()
    stated = theoretical("cpu", device_name(device), 1)
    return {"sustained_ghz": ghz, "method": how,
            "nominal_ghz": (stated or {}).get("nominal_clock_ghz"),
            "nominal_source": (stated or {}).get("clock_source")}


def peak_theory(device: torch.device, threads: int, peaks: dict | None) -> dict | None:
    """The theoretical peaks of ``device`` at the sustained clock stored with ``peaks``."""
    clock = (peaks or {}).get("clock") or {}
    return theoretical(device.type, device_name(device), threads,
                       sustained_ghz=clock.get("sustained_ghz"))


def measure_peaks(device: torch.device, threads: int, windows: int = BEST_OF) -> dict:
    """Every compute peak of ``device`` and its copy bandwidth, on ``threads`` pinned threads,
    with the theoretical peaks beside them (at the clock measured first, ``clock``). A
    precision the device cannot run is left out and named in ``unsupported``."""
    gemm, kernels, tried, unsupported = {}, {}, {}, {}
    cap = process_cap() if device.type == "cpu" else None
    clock = measure_clock(device)
    with pinned_threads(threads):
        for precision in device_precisions(device):
            try:
                kernels[precision], gemm[precision], tried[precision] = precision_peak(
                    device, precision, windows)
            except RuntimeError as exc:
                unsupported[precision] = str(exc).splitlines()[0][:200]
        bandwidth = copy_bytes_per_s(device, windows=windows)
    return {
        "device": str(device), "device_name": device_name(device),
        "host": socket.gethostname(), "torch": torch.__version__, "threads": threads,
        **({"isa_cap": cap} if cap else {}),
        "gemm_flops_per_s": gemm, "memory_bytes_per_s": bandwidth, "unsupported": unsupported,
        "theoretical": peak_theory(device, threads, {"clock": clock}), "clock": clock,
        "method": {"version": METHOD_VERSION, "best_of": windows,
                   "gemm": f"per precision the best of its kernels (candidates), each the "
                           f"fastest of {windows} medians of >= {WINDOW_RUNS} timed calls "
                           f"at the largest scale up to {GEMM_SIZE[device.type]} that runs "
                           f"within {MAX_CALL_S * 1e3:g} ms (2 FLOPs per multiply-add, "
                           f"integer ones alike)",
                   "kernels": kernels, "candidates": tried,
                   "memory": f"fastest of {windows} medians of timed copies of "
                             f"{COPY_BYTES[device.type] // 2**20} MiB (read + write)"},
        "measured_at": _now().isoformat(timespec="seconds"),
    }


def _now() -> datetime:
    return datetime.now(timezone.utc)


def implausible(peaks: dict, theory: dict | None, believed: bool = False) -> dict[str, str]:
    """{precision: why} for each measured peak below ``PLAUSIBLE_FRACTION`` of the
    theoretical one, where the device has instructions for that precision; those measured
    again and believed (``kernel_limited``) are left out unless ``believed``."""
    if not theory:
        return {}
    out = {}
    limited = () if believed else (peaks.get("kernel_limited") or {})
    for precision, peak in (peaks.get("gemm_flops_per_s") or {}).items():
        if precision in limited:
            continue
        top = (theory.get("gemm_flops_per_s") or {}).get(precision)
        if top and (theory.get("native") or {}).get(precision) and \
                peak < PLAUSIBLE_FRACTION * top:
            out[precision] = (f"{precision} {peak / 1e9:,.1f} GFLOP/s is below "
                              f"{PLAUSIBLE_FRACTION:.0%} of the theoretical "
                              f"{top / 1e9:,.1f}")
    return out


def stale_reason(peaks: dict, theory: dict | None, now: datetime | None = None
                 ) -> str | None:
    """Why stored peaks must be measured again, or None to keep them."""
    now = now or _now()
    version = (peaks.get("method") or {}).get("version", 1)
    if version < METHOD_VERSION:
        return f"stored by a version that {OLDER_METHODS.get(version, 'measured otherwise')}"
    if "gemm_flops_per_s" in peaks:
        device = str(peaks.get("device") or "cpu").split(":")[0]
        stored = {**peaks["gemm_flops_per_s"], **(peaks.get("unsupported") or {})}
        missing = [p for p in precisions.on_device(device) if p not in stored]
        if missing:  # a precision registered since they were measured
            return f"no roof stored for {', '.join(missing)}"
    try:
        measured = datetime.fromisoformat(peaks["measured_at"])
    except (KeyError, TypeError, ValueError):
        return "no time of measurement stored"
    if now - measured > timedelta(days=MAX_AGE_DAYS):
        return f"measured {(now - measured).days} days ago (kept {MAX_AGE_DAYS})"
    low = implausible(peaks, theory)
    checked = peaks.get("checked_at") or peaks["measured_at"]
    if low and now - datetime.fromisoformat(checked) > timedelta(hours=RETRY_HOURS):
        return "; ".join(low.values())
    return None


def above_theory(peaks: dict, theory: dict | None) -> dict[str, str]:
    """{precision: why} for each measured peak above its theoretical one: no kernel runs
    faster than the silicon, so the clock the theory was built on was read low."""
    top = (theory or {}).get("gemm_flops_per_s") or {}
    return {p: (f"{p} {peak / 1e9:,.1f} GFLOP/s is above the theoretical {top[p] / 1e9:,.1f}")
            for p, peak in ((peaks or {}).get("gemm_flops_per_s") or {}).items()
            if top.get(p) and peak > top[p]}


def clock_rechecked(device: torch.device, threads: int, peaks: dict) -> dict:
    """``peaks`` with its clock measured again and the faster of the two kept, their
    theoretical peaks rebuilt on it: called where a measured peak or a variant stands above
    the theoretical roof (a clock read while the core was preempted reads low)."""
    out = {**peaks, "clock": faster_clock(peaks.get("clock"), measure_clock(device))}
    out["theoretical"] = peak_theory(device, threads, out)
    return out


def believe(peaks: dict, theory: dict | None, precisions,
            windows: int = REMEASURE_BEST_OF) -> dict:
    """``kernel_limited`` for each of ``precisions`` still below ``PLAUSIBLE_FRACTION`` of its
    theoretical peak after it was measured again: the kernels' limit here, not a busy
    machine, and not measured again at every run for it."""
    low = implausible(peaks, theory, believed=True)
    limited = dict(peaks.get("kernel_limited") or {})
    top = (theory or {}).get("gemm_flops_per_s") or {}
    for precision in precisions:
        if precision in low:
            peak = peaks["gemm_flops_per_s"][precision]
            kernel = ((peaks.get("method") or {}).get("kernels") or {}).get(precision)
            limited[precision] = (
                f"{precision}: the best kernel ({kernel}) reaches {peak / top[precision]:.0%} "
                f"of the theoretical {top[precision] / 1e9:,.1f} GFLOP/s after measuring "
                f"again with {windows} windows more: believed as the kernels' limit here "
                f"(or a machine busy at both measurements), measured again when a variant "
                f"runs above it or after {MAX_AGE_DAYS} days")
        else:
            limited.pop(precision, None)
    if limited:
        peaks["kernel_limited"] = limited
    else:
        peaks.pop("kernel_limited", None)
    return peaks


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
    """What a device's peaks are cached under: the same machine, device, torch and threads,
    and on a CPU the instruction-set cap the process runs under (a capped profile's own
    roofs, never the machine's native ones)."""
    key = {"host": socket.gethostname(), "device": str(device),
           "device_name": device_name(device), "torch": torch.__version__,
           "threads": int(threads)}
    cap = process_cap() if device.type == "cpu" else None
    return {**key, "isa_cap": cap} if cap else key


def cached_peaks(store, device: torch.device, threads: int) -> dict:
    """The peaks of ``device`` from the store: measured and stored the first time, and again
    when ``stale_reason`` gives one (an implausibly low peak is raised to the higher of the
    two measurements, an old one replaced). Peaks stored before the clock was measured have
    it measured (a fraction of a second) and stored with them."""
    key = peaks_key(device, threads)
    peaks = store.device_peaks(key)
    if peaks is None:  # a new store on a machine that measured them for another one
        peaks = machine_peaks.read(key)
        if peaks is not None:
            store.save_device_peaks(key, peaks)
    if peaks is not None and device.type == "cpu" and not peaks.get("clock"):
        peaks = {**peaks, "clock": measure_clock(device)}
        store.save_device_peaks(key, peaks)
    if peaks is not None and above_theory(peaks, peak_theory(device, threads, peaks)):
        peaks = clock_rechecked(device, threads, peaks)
        store.save_device_peaks(key, peaks)
    theory = peak_theory(device, threads, peaks)
    reason = None if peaks is None else stale_reason(peaks, theory)
    if peaks is not None and reason is None:
        return {**peaks, "theoretical": theory}
    fresh = measure_peaks(device, threads)
    if peaks is not None:
        keep_best = "below" in reason
        fresh = logged(merged(peaks, fresh) if keep_best else fresh, peaks, reason)
    if above_theory(fresh, peak_theory(device, threads, fresh)):
        fresh = clock_rechecked(device, threads, fresh)
    theory = peak_theory(device, threads, fresh)
    fresh["theoretical"] = theory
    low = implausible(fresh, theory)
    if low:  # measured beside other work: once more, each kernel keeping its better figure
        return remeasure(store, device, threads, fresh, low, read_low=True)
    store.save_device_peaks(key, fresh)
    machine_peaks.keep(key, fresh)
    return fresh


def remeasure(store, device: torch.device, threads: int, peaks: dict,
              reasons: dict[str, str], read_low: bool = False) -> dict:
    """Measure ``reasons``' precisions of ``device`` again, after a variant ran above their
    peaks (``REMEASURE_BEST_OF`` windows, the clock checked too) or they read implausibly
    low at their first measurement (``read_low``: ``BEST_OF`` windows more): each candidate
    kernel keeps the higher of its two figures and the peak is the best of them, the
    re-measurement is logged, one still below half its theoretical peak is believed
    (``believe``), and the store (where there is one) keeps the result."""
    windows = BEST_OF if read_low else REMEASURE_BEST_OF
    fresh = dict(peaks)
    gemm = dict(peaks.get("gemm_flops_per_s") or {})
    method = dict(peaks.get("method") or {})
    kernels, tried = dict(method.get("kernels") or {}), dict(method.get("candidates") or {})
    with pinned_threads(threads):
        for precision in reasons:
            try:
                kernel, rate, seen = precision_peak(device, precision, windows)
            except RuntimeError:
                continue  # it ran before: a kernel that fails now leaves the peak as it was
            # Each candidate at the best it was seen to do, the peak the best of them.
            tried[precision] = best_candidates({precision: tried.get(precision) or {}},
                                               {precision: seen})[precision]
            best = best_of(tried[precision])
            if best is not None and best[1] >= gemm.get(precision, 0.0):
                kernels[precision], gemm[precision] = best
            elif rate > gemm.get(precision, 0.0):  # stored without candidates
                gemm[precision], kernels[precision] = rate, kernel
    fresh.update(gemm_flops_per_s=gemm, measured_at=_now().isoformat(timespec="seconds"),
                 method={**method, "kernels": kernels, "candidates": tried})
    if device.type == "cpu" and not read_low:  # a variant above a roof: above theory too?
        fresh = clock_rechecked(device, threads, fresh)
    fresh = logged(fresh, peaks, "; ".join(reasons.values()), list(reasons))
    fresh = believe(fresh, fresh.get("theoretical"), list(reasons), windows)
    if store is not None:
        store.save_device_peaks(peaks_key(device, threads), fresh)
        machine_peaks.keep(peaks_key(device, threads), fresh)
    return fresh


class MachineOnly:
    """Where a process with no results store (a cluster's timing node) keeps its roofs: the
    machine's file beside the weights cache alone (``machine_peaks``), so the node measures
    them once, not at every sweep it times (3-5 s each on a two-core node)."""

    def device_peaks(self, key: dict) -> dict | None:
        return machine_peaks.read(key)

    def save_device_peaks(self, key: dict, peaks: dict) -> None:
        pass  # every save of peaks writes the machine's file beside it (machine_peaks.keep)


def sweep_peaks(store, device: torch.device, threads: int) -> dict:
    """The environment card's ``peaks``: the sweep's device, and the CPU, where the INT8
    variants of a GPU sweep run. Without a store (a cluster's timing node) the machine's own
    file keeps them (``MachineOnly``)."""
    devices = [device] + ([torch.device("cpu")] if device.type != "cpu" else [])
    return {str(d): cached_peaks(MachineOnly() if store is None else store, d, threads)
            for d in devices}
