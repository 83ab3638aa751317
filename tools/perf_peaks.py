"""make perf's peaks section, also run by make perf-gpu on a GPU: the tool's fp32 GEMM peak
against torch.utils.benchmark.Timer on the same matmul, and against the theoretical peak."""

from __future__ import annotations

import statistics

from tools.checks import check


def peaks(repeats: int, device_name: str = "cpu") -> dict:
    """The tool's fp32 GEMM peak against torch.utils.benchmark timing the same matmul, on the
    same pinned threads (IEEE fp32 on a GPU), interleaved so drift hits both alike."""
    import torch
    from torch.utils import benchmark

    from benchmarks.measure.environment import default_threads
    from benchmarks.measure.latency import pinned_threads
    from benchmarks.measure.peaks import GEMM_SIZE, fp32_matmuls, gemm_call, measure_peaks

    threads = default_threads()
    device = torch.device(device_name)
    n = GEMM_SIZE[device.type]
    _, call = gemm_call(device, "fp32", n)
    tool, timer, last = [], [], {}
    for _ in range(repeats):
        last = measure_peaks(device, threads)
        tool.append(last["gemm_flops_per_s"]["fp32"])
        with pinned_threads(threads), fp32_matmuls(device, "ieee"):
            t = benchmark.Timer("call()", globals={"call": call}, num_threads=threads)
            timer.append(2.0 * n ** 3 / t.blocked_autorange(min_run_time=0.5).median)
    # Medians of each: on a busy machine single pairs swing by 1.5x either way.
    ratio = statistics.median(tool) / statistics.median(timer)
    gflops = {k: round(v / 1e9, 1) for k, v in last["gemm_flops_per_s"].items()}
    theory = ((last.get("theoretical") or {}).get("gemm_flops_per_s") or {}).get("fp32")
    return {"threads": threads, "tool_fp32_flops": tool, "timer_fp32_flops": timer,
            "peaks": last, "checks": [
                check(f"{device_name} fp32 GEMM peak ({n}x{n}): the tool / "
                      f"torch.utils.benchmark.Timer on the same matmul", round(ratio, 3),
                      "0.80-1.20", 0.8 <= ratio <= 1.2,
                      f"medians of {repeats} interleaved repeats; {threads} thread(s); peaks "
                      f"GFLOP/s {gflops}, copy {last['memory_bytes_per_s'] / 1e9:.1f} GB/s"),
                check(f"{device_name} fp32 peak / its theoretical peak",
                      round(statistics.median(tool) / theory, 2) if theory else "-",
                      ">= 0.5 (measured again below)", not theory or
                      statistics.median(tool) >= 0.5 * theory,
                      (last.get("theoretical") or {}).get("derivation", {}).get("fp32", "")),
            ]}
