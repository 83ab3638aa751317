"""How two measurements of a device's peaks combine (``benchmarks.measure.peaks``): each
candidate kernel at the best it was seen to do and the peak the best of them, the faster of
two clock readings, and the log a re-measurement leaves. Plain records, no timing."""

from __future__ import annotations


def best_candidates(old: dict, fresh: dict) -> dict:
    """Each precision's candidates at the best each was seen to do in either measurement (a
    kernel that failed in one keeps the other's figure, or its reason where it never ran)."""
    out = {}
    for precision in set(old) | set(fresh):
        mine = dict(old.get(precision) or {})
        for kernel, value in (fresh.get(precision) or {}).items():
            before = mine.get(kernel)
            if not isinstance(value, float):
                mine.setdefault(kernel, value)
            elif not isinstance(before, float) or value > before:
                mine[kernel] = value
        out[precision] = mine
    return out


def best_of(tried: dict) -> tuple[str, float] | None:
    """(kernel, FLOP/s) of the fastest candidate that ran, or None where none did."""
    rates = {kernel: v for kernel, v in tried.items() if isinstance(v, float)}
    if not rates:
        return None
    best = max(rates, key=rates.get)
    return best, rates[best]


def merged(old: dict, fresh: dict, precisions=None) -> dict:
    """``fresh`` with each (or each of ``precisions``') peak the higher of the two: a peak is
    the best the device was seen to do on these threads, and each candidate kernel's figure
    the best it was seen to do, so the peak is the best of the candidates stored with it."""
    out = dict(fresh)
    gemm = dict(fresh.get("gemm_flops_per_s") or {})
    method = dict(fresh.get("method") or {})
    kernels = dict(method.get("kernels") or {})
    fresh_tried = method.get("candidates") or {}
    old_tried = (old.get("method") or {}).get("candidates") or {}
    tried = dict(fresh_tried)
    for precision in gemm.keys() | (old.get("gemm_flops_per_s") or {}).keys():
        if precisions is not None and precision not in precisions:
            continue
        both = best_candidates({precision: old_tried.get(precision) or {}},
                               {precision: fresh_tried.get(precision) or {}})[precision]
        best = best_of(both)
        if best is not None:
            tried[precision] = both
            kernels[precision], gemm[precision] = best
        else:  # stored without candidates (an older store): the higher figure alone
            value = (old.get("gemm_flops_per_s") or {}).get(precision, 0)
            if value > gemm.get(precision, 0):
                gemm[precision] = value
                kernels[precision] = ((old.get("method") or {}).get("kernels") or {}).get(
                    precision, kernels.get(precision))
    out["gemm_flops_per_s"] = gemm
    out["method"] = {**method, "kernels": kernels, "candidates": tried}
    out["memory_bytes_per_s"] = max(old.get("memory_bytes_per_s") or 0,
                                    fresh.get("memory_bytes_per_s") or 0)
    out["clock"] = faster_clock(old.get("clock"), fresh.get("clock"))
    return out


def faster_clock(old: dict | None, fresh: dict | None) -> dict | None:
    """The clock record with the higher sustained clock (a chain read preempted reads low)."""
    ghz = [(c.get("sustained_ghz") or 0.0, i, c) for i, c in enumerate((old, fresh)) if c]
    return max(ghz)[2] if ghz else None


def logged(peaks: dict, previous: dict | None, reason: str, precisions=None) -> dict:
    """``peaks`` measured again, with why and what moved appended to the log it carries
    (``remeasured``: the last ten) and ``checked_at`` set."""
    log = list((previous or {}).get("remeasured") or [])
    before = (previous or {}).get("gemm_flops_per_s") or {}
    log.append({"at": peaks["measured_at"], "reason": reason,
                "precisions": list(precisions) if precisions else "all",
                "before": {p: v for p, v in before.items()
                           if precisions is None or p in precisions},
                "after": {p: v for p, v in peaks["gemm_flops_per_s"].items()
                          if precisions is None or p in precisions}})
    peaks["remeasured"] = log[-10:]
    peaks["checked_at"] = peaks["measured_at"]
    return peaks
