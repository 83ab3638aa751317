"""The roofline: why each variant is as fast as it is. Torch-free arithmetic.

A device has compute roofs (its measured GEMM peak per precision, ``benchmarks.measure.peaks``) and a
memory roof (its measured copy bandwidth times a kernel's arithmetic intensity). A variant is
one point: its achieved FLOP/s (dense FLOPs per batch over its p50) against its arithmetic
intensity (FLOPs per byte moved). Below the slanted roof it is memory-bound (more compute per
byte, such as INT8's faster arithmetic, buys little); under the flat roof, compute-bound.

Bytes moved, per batch, is an estimate (``measure.measure_traffic``): the weights read once,
the input read once, every op's output written once and read once by its consumer. It counts
what a forward must move at least once without fusion, not what the caches absorb, so the
intensity is a lower bound and the memory roof a conservative one.

A variant is held to the roof of the precision most of its multiply-adds ran in, counted per
layer (``benchmarks.measure.macs``) or from a graph runtime's kernel census, not the one its
technique's name declares (``variant_precision``). A precision is one entry of the registry
(``benchmarks.measure.precisions``); a point in one no one registered keeps its name, gets no
roof and carries ``roofline_warning`` (the chart leaves it off and says so), never fp32's.

A point above its compute roof means the roof was measured low (on a busy machine): the
sweep then measures that peak again (``benchmarks.run.roofs``, runtime cells included), and a
point still above it is flagged (``above_peak``), never shown as a plain percentage over 100.
Beside the measured roof each point carries the device's theoretical peak for its precision
(``theoretical_peak_flops_per_s``, ``benchmarks.measure.theory``, at the clock measured on the
machine); a point above that one is flagged too (``above_theoretical``): it would mean the
FLOP count or the theoretical roof is wrong, and the chart says so rather than draw it as a
plain point.

A row timed under an instruction-set cap (a profile's preview, ``benchmarks.run.profiles``) is
held to the roofs measured under that cap in its own process (``row_peaks``), never to the
native ones; where it has none its figures against a roof are None and ``peak_note`` says why.
"""

from __future__ import annotations

import math

from benchmarks.measure import precisions


def census_precision(census: dict | None, runtime: dict | None) -> str | None:
    """The precision most of a cell's multiply-adds ran in, where it was counted: per layer
    (``measure.macs``: dynamic INT8 on a CNN runs 98% of them in fp32 convolutions), else a
    graph runtime's kernel census (its ``precision``: int8 where most of its convolutions and
    matmuls run integer kernels, "int8+fp32" where most stay float); None where neither was
    taken."""
    if census and precisions.known(census.get("precision")):
        return census["precision"]
    ran = str((runtime or {}).get("precision") or "")
    if (runtime or {}).get("name") in (None, "eager", "compile") or not ran:
        return None  # a PyTorch module's precision is from its MACs, not its layer count
    ran = ran.split("+")[-1] if "+" in ran else ran
    return ran if precisions.known(ran) else None


def variant_precision(config: dict, environment: dict, device: str,
                      census: dict | None = None, runtime: dict | None = None) -> str:
    """The precision a variant's kernels ran in, the roof it is held to: the one most of its
    multiply-adds ran in where they were counted (``census_precision``); else what the last
    of its techniques (in chain order) that declares one says it runs in
    (``Technique.precision``: INT8's quantized kernels, AMP's autocast dtype), else tf32 for
    a CUDA sweep that chose it, fp32."""
    counted = census_precision(census, runtime)
    if counted == precisions.DEFAULT:
        return _float_default(environment, device)  # the hooks see fp32 tensors (tf32's too)
    if counted is not None:
        return counted
    from optimizers import registry
    declared = None
    for technique in registry.techniques():
        if config.get(technique.name):
            declared = technique.precision(config[technique.name]) or declared
    if declared is not None:
        return declared  # unregistered, it is named on the point and left off the chart
    return _float_default(environment, device)


def _float_default(environment: dict, device: str) -> str:
    """fp32, or on CUDA the precision whose matmul mode the sweep chose for its fp32 matmuls
    (``--fp32 tf32``: the tf32 entry's ``matmul_mode``)."""
    mode = (environment.get("precision") or {}).get(precisions.DEFAULT)
    if str(device).startswith("cuda") and mode:
        return precisions.by_matmul_mode(mode) or precisions.DEFAULT
    return precisions.DEFAULT


def unknown_precision(precision: str) -> str:
    """The one line a point in a precision no one registered carries instead of a roof."""
    return (f"precision {precision!r} is not registered "
            f"(registered: {', '.join(precisions.names())}): left off the roofline")


def device_peaks(peaks: dict, device: str) -> dict | None:
    """The peaks of ``device`` ("cpu", "cuda:0") from the environment card's ``peaks``."""
    return (peaks or {}).get(str(device))


def row_peaks(environment: dict, device: str, runtime: dict | None
              ) -> tuple[dict | None, str | None]:
    """(the peaks a row is held to, why it has none): the environment card's for its device,
    or for a row timed under an instruction-set cap (``runtime.profile``) the ones measured
    under the cap, which its profile carries."""
    profile = (runtime or {}).get("profile") or {}
    if not profile.get("cap"):
        return device_peaks(environment.get("peaks"), device), None
    capped = device_peaks(profile.get("peaks"), device)
    if capped is None:
        return None, (f"no roof was measured under the {profile.get('name')} profile's cap "
                      f"({profile['cap']}); the native one is not its roof")
    return capped, None


def point(*, flops: int | None, batch_size: int, p50_ms: float | None,
          traffic_bytes: int | None, precision: str, peaks: dict | None) -> dict:
    """One variant on its device's roofline. Every figure is None where an input is missing
    (no FLOP count, not timed, no peaks measured for its device), and where its precision is
    not registered: then ``roofline_warning`` names it, rather than holding it to the fp32 roof."""
    out = {"precision": precision, "achieved_flops_per_s": None, "arithmetic_intensity": None,
           "percent_of_peak": None, "peak_flops_per_s": None, "roof_flops_per_s": None,
           "bound": None, "traffic_bytes": traffic_bytes, "above_peak": None,
           "theoretical_peak_flops_per_s": None, "above_theoretical": None,
           "peak_note": None}
    if not precisions.known(precision):
        out["roofline_warning"] = unknown_precision(precision)  # never held to the fp32 roof
        return out
    work = flops * batch_size if flops else None
    if work and p50_ms and p50_ms > 0:
        out["achieved_flops_per_s"] = work / (p50_ms / 1e3)
    if work and traffic_bytes:
        out["arithmetic_intensity"] = work / traffic_bytes
    if not peaks:
        return out
    peak = (peaks.get("gemm_flops_per_s") or {}).get(precision)
    bandwidth = peaks.get("memory_bytes_per_s")
    out["peak_flops_per_s"] = peak
    why = (peaks.get("unsupported") or {}).get(precision)
    if peak is None and why and out["achieved_flops_per_s"] is not None:
        out["peak_note"] = f"no {precision} roof: {why}"
    out["theoretical_peak_flops_per_s"] = ((peaks.get("theoretical") or {})
                                           .get("gemm_flops_per_s") or {}).get(precision)
    if peak and out["achieved_flops_per_s"] is not None:
        out["percent_of_peak"] = 100.0 * out["achieved_flops_per_s"] / peak
        out["above_peak"] = out["percent_of_peak"] > 100.0
    top = out["theoretical_peak_flops_per_s"]
    if top and out["achieved_flops_per_s"] is not None:
        out["above_theoretical"] = out["achieved_flops_per_s"] > top
    if peak and bandwidth and out["arithmetic_intensity"] is not None:
        memory_roof = out["arithmetic_intensity"] * bandwidth
        out["roof_flops_per_s"] = min(peak, memory_roof)
        out["bound"] = "memory" if memory_roof < peak else "compute"
    return out


def ridge_point(peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """The intensity (FLOPs per byte) where the memory roof meets the compute roof."""
    return peak_flops_per_s / bandwidth_bytes_per_s


def roof(intensity: float, peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """The attainable FLOP/s at ``intensity``: the lower of the two roofs."""
    if not (math.isfinite(intensity) and intensity > 0):
        raise ValueError(f"arithmetic intensity must be a positive number, got {intensity!r}")
    return min(peak_flops_per_s, intensity * bandwidth_bytes_per_s)
