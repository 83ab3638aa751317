"""After a sweep is timed: no variant stands above its roof unsaid.

A variant's achieved FLOP/s above its device's measured peak for its precision means the
peak was taken low (a busy machine when it was stored). That precision is then measured again
(``peaks.remeasure``: more windows, the higher figure kept, the store updated, the reason
logged in the peaks' ``remeasured`` list); a variant still above it after that is flagged in
its roofline point (``above_peak``), and the table marks it.
"""

from __future__ import annotations

from benchmarks.report.results import VariantResult


def over_roof(results: list[VariantResult], environment: dict) -> dict:
    """{device: {precision: why}} for every precision some variant ran above."""
    over: dict = {}
    for result in results:
        if not result.ok:
            continue
        point = result.roofline(environment)
        if not point.get("above_peak"):
            continue
        why = over.setdefault(result.device, {})
        why.setdefault(point["precision"], (
            f"{result.name} ran at {point['achieved_flops_per_s'] / 1e9:,.2f} GFLOP/s, "
            f"above the stored {point['precision']} peak of "
            f"{point['peak_flops_per_s'] / 1e9:,.2f}"))
    return over


def check_roofs(results: list[VariantResult], environment: dict, store, threads: int,
                remeasure=None) -> bool:
    """Measure again every peak a variant ran above (``remeasure``: ``peaks.remeasure`` by
    default, swappable for tests); True when the environment's peaks changed."""
    over = over_roof(results, environment)
    if not over:
        return False
    import torch
    if remeasure is None:
        from benchmarks.measure.peaks import remeasure
    from optimizers.errors import described
    peaks = environment.setdefault("peaks", {})
    for device, reasons in over.items():
        try:
            peaks[device] = remeasure(store, torch.device(device), threads, peaks[device],
                                      reasons)
        except Exception as exc:  # the sweep's figures stand: the card says what failed
            peaks[device] = {**peaks[device], "remeasure_failed": described(exc)}
    return True
