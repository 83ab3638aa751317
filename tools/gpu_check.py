"""``make perf-gpu``: the checks only a GPU can show, as one short script for a lent machine.

    python -m tools.gpu_check [--device cuda] [--output DIR] [--quick]

It measures, side by side in one run and as medians of interleaved rounds:

- CUDA-event timing: the engine's p50 (events, one synchronize at the end) against
  ``torch.utils.benchmark.Timer`` (which synchronizes around its own loop);
- AMP: fp16 autocast against fp32, latency and peak GPU memory
  (``torch.cuda.max_memory_allocated``);
- INT8 routing: a real sweep with ``--device cuda`` through the CLI, whose INT8 variants must
  say they ran on the CPU (PyTorch's x86 INT8 kernels) while the others ran on the GPU;
- DDP over NCCL with one worker, unless ``--quick``.

Writes ``gpu.json`` (raw figures) and ``gpu.md`` (a table for docs/PERFORMANCE.md) into
``--output`` (default ``results/``); exits 0 when every check holds, 1 when one does not,
2 when the device asked for is not there. ``--device cpu`` runs the same code on the CPU
(bf16 autocast, small shapes), which is how the test suite keeps this script working on
machines without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .perf import ROOT, check, check_rows, unmet

# ResNet-18 at these shapes keeps an H200 busy long enough for stable events, yet the whole
# script fits in a couple of minutes of a lent machine's time.
SHAPES = {"cuda": (128, (3, 224, 224)), "cpu": (8, (3, 32, 32))}
QUICK_SHAPES = {"cuda": (32, (3, 64, 64)), "cpu": (4, (3, 32, 32))}


def _p50(model, x, device, autocast=None, min_time_s: float = 0.5) -> float:
    from benchmarks.measure import measure_latency
    from benchmarks.results import LatencyStats
    tracker = measure_latency(model, x, device, autocast=autocast, min_time_s=min_time_s)
    return LatencyStats.from_samples(tracker.samples_ms, x.shape[0]).p50


def kernels(device_name: str, rounds: int, quick: bool) -> dict:
    """Event timing against Timer, and AMP against fp32 (latency and peak memory)."""
    import torch
    import torchvision
    from torch.utils import benchmark

    from benchmarks.environment import default_threads
    from benchmarks.measure import measure_peak_memory, pinned_threads

    device = torch.device(device_name)
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    batch, shape = (QUICK_SHAPES if quick else SHAPES)[device.type]
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).to(device).eval()
    x = torch.randn(batch, *shape, device=device)
    amp = lambda: torch.autocast(device.type, dtype=amp_dtype)  # noqa: E731 (fresh per use)
    min_time = 0.2 if quick else 0.5
    engine, timer, mixed = [], [], []  # engine: the fp32 p50, against Timer and AMP alike
    threads = default_threads()
    with pinned_threads(threads):  # the engine's threads, for both the engine and Timer
        for _ in range(rounds):  # interleaved, so drift hits every series alike
            engine.append(_p50(model, x, device, min_time_s=min_time))
            with torch.inference_mode():
                t = benchmark.Timer("m(x)", globals={"m": model, "x": x}, num_threads=threads)
                timer.append(t.blocked_autorange(min_run_time=min_time).median * 1000)
            mixed.append(_p50(model, x, device, autocast=amp(), min_time_s=min_time))
    mem32, method = measure_peak_memory(model, x, device)
    mem16, _ = measure_peak_memory(model, x, device, autocast=amp())
    ratio = statistics.median(e / t for e, t in zip(engine, timer))
    speedup = statistics.median(a / b for a, b in zip(engine, mixed))
    dtype = str(amp_dtype).removeprefix("torch.")
    what = f"ResNet-18 b{batch} {'x'.join(map(str, shape))} on {device.type}"
    return {
        "engine_p50_ms": engine, "timer_median_ms": timer,
        f"{dtype}_p50_ms": mixed, "peak_bytes": {"fp32": mem32, dtype: mem16},
        "memory_method": method,
        "checks": [
            check(f"{what}: engine p50 ({'CUDA events' if device.type == 'cuda' else 'clock'})"
                  f" / Timer median", round(ratio, 3), "0.90-1.10", 0.9 <= ratio <= 1.1,
                  f"median of {rounds} interleaved pairs"),
            check(f"{what}: AMP {dtype} speed-up over fp32", f"{speedup:.2f}x",
                  "> 1x on CUDA" if device.type == "cuda" else "(reported)",
                  speedup > 1 or device.type != "cuda", f"median of {rounds} interleaved rounds"),
            check(f"{what}: peak memory {dtype} / fp32 ({method})",
                  round(mem16 / mem32, 3), "< 1 on CUDA" if device.type == "cuda" else
                  "(reported)", mem16 < mem32 or device.type != "cuda",
                  f"fp32 {mem32 / 2**20:.1f} MiB, {dtype} {mem16 / 2**20:.1f} MiB"),
        ]}


def _cli(args: list[str], tmp: str) -> subprocess.CompletedProcess:
    env = {"COMPRESSION_BENCH_CACHE": f"{tmp}/cache", "COMPRESSION_BENCH_STORE": f"{tmp}/s.db"}
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=900)


def routing(device_name: str, quick: bool) -> dict:
    """A real sweep through the CLI: every variant succeeds, INT8 says it ran on the CPU and
    every other variant ran on the device asked for."""
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/sweep.json"
        args = ["run", "--device", device_name, "--prune", "0.5", "--amp", "--int8", "static",
                "--combine", "--json", out, "--quiet"]
        if quick:
            args += ["--epochs", "2", "--min-time", "0.2"]
        t0 = time.perf_counter()
        proc = _cli(args, tmp)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"the sweep failed ({proc.returncode}): "
                               f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
        variants = json.loads(Path(out).read_text())["variants"]
    placed = {v["name"]: v["device"] for v in variants}
    # INT8 (alone or chained) runs on PyTorch's x86 kernels: the CPU, whatever was asked.
    expected = {v["name"]: "cpu" if "int8" in v["techniques"] else device_name
                for v in variants}
    wrong = [f"{name} on {dev}, expected {expected[name]}" for name, dev in placed.items()
             if dev.split(":")[0] != expected[name]]
    errors = [v["name"] for v in variants if v.get("error")]
    return {
        "variants": [{k: v.get(k) for k in ("name", "device", "accuracy", "memory_method")}
                     | {"p50_ms": (v.get("latency_ms") or {}).get("p50")} for v in variants],
        "checks": [
            check(f"sweep --device {device_name} (prune, amp, int8 static, combine): every "
                  f"variant succeeds", f"{len(variants) - len(errors)}/{len(variants)}", "all",
                  not errors, f"{wall:.0f} s" + (f"; failed: {', '.join(errors)}" if errors else "")),
            check("INT8 variants labelled cpu, the others the device asked for",
                  ", ".join(f"{n}: {d}" for n, d in placed.items()), "as labelled", not wrong,
                  "; ".join(wrong)),
        ]}


def nccl(device_name: str) -> dict:
    """DDP with one worker over the device's backend (NCCL on CUDA), fp16 compression."""
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/ddp.json"
        proc = _cli(["distributed", "--device", device_name, "--workers", "1",
                     "--compression", "none,fp16", "--steps", "30", "--no-store",
                     "--json", out], tmp)
        if proc.returncode != 0:
            raise RuntimeError(f"distributed failed ({proc.returncode}): "
                               f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
        runs = json.loads(Path(out).read_text())["runs"]
    failed = [r["name"] for r in runs if r.get("error")]
    return {"runs": runs, "checks": [
        check(f"DDP on {device_name}, 1 worker, none and fp16 compression",
              ", ".join(f"{r['name']}: {r.get('throughput') or 0:.0f} samples/s" for r in runs),
              "both finish", len(runs) == 2 and not failed, ", ".join(failed))]}


def render(results: dict, env: dict) -> str:
    lines = [f"GPU checks (`make perf-gpu`), {env.get('created_at', '')} on "
             f"{env.get('device_name') or env.get('cpu')}, torch {env.get('torch')}.", "",
             "| target | measured | threshold | met |", "|---|---|---|---|"]
    for name, section in results.items():
        lines += check_rows(name, section)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.gpu_check")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--output", type=Path, default=ROOT / "results")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true",
                        help="small shapes and budgets, no DDP (what the tests run)")
    args = parser.parse_args(argv)
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here (torch.cuda.is_available() is False); run it on "
              "a GPU machine, or pass --device cpu", file=sys.stderr)
        return 2
    if args.rounds < 1:
        print(f"gpu_check: --rounds must be at least 1, got {args.rounds}", file=sys.stderr)
        return 2
    from benchmarks.environment import environment_card, quiet_library_noise
    quiet_library_noise()
    env = environment_card(torch.device(args.device))
    sections = {"kernels": lambda: kernels(args.device, args.rounds, args.quick),
                "routing": lambda: routing(args.device, args.quick)}
    if not args.quick:
        sections["ddp"] = lambda: nccl(args.device)
    results = {}
    for name, run in sections.items():
        print(f"gpu_check: {name} ...", file=sys.stderr, flush=True)
        try:
            results[name] = run()
        except Exception as exc:  # one broken section must not hide the others' figures
            results[name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "gpu.json").write_text(json.dumps(
        {"environment": env, "results": results}, indent=2, default=str))
    (args.output / "gpu.md").write_text(render(results, env))
    failed = unmet(results)
    for f in failed:
        print(f"gpu_check: not met: {f}", file=sys.stderr)
    print(f"gpu_check: figures in {args.output / 'gpu.md'}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
