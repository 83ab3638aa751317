"""``make perf-gpu``: the checks only a GPU can show, as one short script for a lent machine.

    python -m tools.gpu_check [--device cuda] [--output DIR] [--quick] [--budget S]
    python -m tools.gpu_check --dry-run [--output DIR]

Sections, each written to ``gpu.json`` / ``gpu.md`` in ``--output`` (default ``results/``) the
moment it ends, so a cut-off run keeps what it measured:

1. ``timing``: CUDA-event p50 against ``torch.utils.benchmark.Timer`` on ResNet-18, and on the
   small CNN the event p50 against the host's time to issue a call (launch-bound or not);
2. ``memory``: a variant's peak memory alone and with a second model resident (must agree
   within 5%: the peak is the variant's, not the process's);
3. ``fp32``: ResNet-50 with TF32 off and on (what "fp32" means is fixed per sweep);
4. ``amp``: ResNet-18 at batch 128, 224x224, under autocast in NCHW and as deployed (weights
   cast once, channels-last), and the fp16 speed-up over IEEE fp32 on ResNet-50 at batch 64
   (target >= 2x);
5. ``sweep``: a real ``--device cuda`` sweep whose distillation, QAT and channel pruning train
   on the GPU, with INT8 labelled CPU;
6. ``runtimes``: the seed CNN under eager, ``torch.compile`` and (where installed) ONNX
   Runtime's CUDA provider at batch 1 and 32, timed with CUDA events in the same rounds, and
   energy per inference from NVML where ``nvidia-ml-py`` is there;
7. ``ddp``: DDP over NCCL with none and fp16 compression, fp16's bytes per step half of none's;
8. ``peaks``: the roofline's measured peaks on the device (GEMM per precision, copy
   bandwidth), the fp32 one against ``torch.utils.benchmark`` timing the same matmul.

Built for a bare machine with only torch, torchvision and scikit-learn: nothing here or in
what it runs needs tqdm or safetensors (the sweep runs ``--quiet --no-cache``); channel pruning
needs torch-pruning and is reported as skipped without it. Another torch version than the
project's pin is recorded and tolerated. Every step has a timeout and the whole run a budget
(default 420 s, under a lent command's 600 s); a one-screen summary ends it. Exit 0: every
check met; 1: one was not; 2: the device asked for is not there. ``--device cpu --quick`` runs
the same code on the CPU, which is how the test suite keeps it working without a GPU.

``--dry-run`` is that CPU run, and then the list of every section and what the lent machine
would be given to run it (``tools.gpu_carry``: the wheels its own Python lacks, their sizes
and total against the 64 MiB a call carries, built in ``DIR/carry``). Exit 0 when every section
ran and the wheels fit, whatever the CPU's speed-ups. The recipe for a lent machine
(``docs/methodology.md``): ``make perf-gpu ARGS=--dry-run`` here, then in one call with ``results/carry``
carried, ``pip install --no-deps --no-index results/carry/*.whl && python3 -m tools.gpu_check
--output $OUT``.
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

from optimizers.errors import time_limit
from tools.checks import ROOT, check, check_rows, unmet
from tools.gpu_carry import carry

STEP_TIMEOUT_S = 150       # one section, or one subprocess
DEFAULT_BUDGET_S = 420     # the whole run: under a lent command's 600 s, with room to write


def _p50(model, x, device, autocast=None, min_time_s: float = 0.3):
    from benchmarks.measure.latency import measure_latency
    from benchmarks.report.records import LatencyStats
    from benchmarks.report.results import VariantResult
    tracker = measure_latency(model, x, device, autocast=autocast, min_time_s=min_time_s)
    stats = LatencyStats.from_samples(tracker.samples_ms, x.shape[0])
    launch = VariantResult.of("x", latency_samples_ms=tracker.samples_ms,
                              host_samples_ms=tracker.host_samples_ms).timing.launch_bound
    host = statistics.median(tracker.host_samples_ms) if tracker.host_samples_ms else None
    return stats.p50, host, launch


def _resnet(name: str, device):
    import torch
    import torchvision
    torch.manual_seed(0)
    return getattr(torchvision.models, name)(num_classes=1000).to(device).eval()


def _shape(device, quick: bool, batch: int, size: int = 224):
    if device.type != "cuda" or quick:
        return (4 if device.type != "cuda" else 32), 32 if device.type != "cuda" else 64
    return batch, size


def timing(device, rounds: int, quick: bool) -> dict:
    import torch
    from torch import nn
    from torch.utils import benchmark

    from benchmarks.measure.environment import default_threads
    from benchmarks.measure.latency import pinned_threads
    batch, size = _shape(device, quick, 128)
    model = _resnet("resnet18", device)
    x = torch.randn(batch, 3, size, size, device=device)
    engine, timer = [], []
    threads = default_threads()
    with pinned_threads(threads):
        for _ in range(rounds):  # interleaved, so drift hits both alike
            engine.append(_p50(model, x, device)[0])
            with torch.inference_mode():
                t = benchmark.Timer("m(x)", globals={"m": model, "x": x}, num_threads=threads)
                timer.append(t.blocked_autorange(min_run_time=0.3).median * 1000)
        small = nn.Sequential(nn.Conv2d(1, 64, 3), nn.ReLU(), nn.Conv2d(64, 128, 3), nn.ReLU(),
                              nn.Flatten(), nn.Linear(128 * 16, 10)).to(device).eval()
        p50, host, launch_bound = _p50(small, torch.randn(32, 1, 8, 8, device=device), device)
    ratio = statistics.median(e / t for e, t in zip(engine, timer))
    clock = "CUDA events" if device.type == "cuda" else "perf_counter"
    return {"engine_p50_ms": engine, "timer_median_ms": timer,
            "small_cnn": {"event_p50_ms": p50, "host_ms": host, "launch_bound": launch_bound},
            "checks": [
                check(f"ResNet-18 b{batch} {size}x{size}: engine p50 ({clock}) / Timer",
                      round(ratio, 3), "0.90-1.10", 0.9 <= ratio <= 1.1,
                      f"median of {rounds} interleaved pairs"),
                check("seed_cnn b32 8x8: event p50 against the host's time per call",
                      f"{p50:.3f} ms vs {host:.3f} ms host" if host else f"{p50:.3f} ms",
                      "flagged launch-bound on CUDA", launch_bound or device.type != "cuda",
                      "the flag the engine shows beside such a variant")]}


def memory(device, quick: bool) -> dict:
    """The same variant's peak memory with and without a second model resident."""
    import torch

    from benchmarks.measure.memory import measure_peak_memory
    batch, size = _shape(device, quick, 64)
    model = _resnet("resnet18", device)
    x = torch.randn(batch, 3, size, size)
    alone, method = measure_peak_memory(model, x, device)
    other = _resnet("resnet50", device)  # stays resident, as a sweep's baseline does
    with_other, _ = measure_peak_memory(model, x, device)
    del other
    ratio = with_other / alone
    return {"alone_bytes": alone, "with_resident_bytes": with_other, "method": method,
            "checks": [check(f"ResNet-18 b{batch}: peak memory with a ResNet-50 resident / "
                             f"alone ({method})", round(ratio, 4), "0.95-1.05",
                             0.95 <= ratio <= 1.05,
                             f"alone {alone / 2**20:.1f} MiB, with {with_other / 2**20:.1f} MiB")]}


def fp32(device, rounds: int, quick: bool) -> dict:
    import torch

    from benchmarks.measure.environment import apply_precision
    batch, size = _shape(device, quick, 64)
    model = _resnet("resnet50", device)
    x = torch.randn(batch, 3, size, size, device=device)
    times = {"ieee": [], "tf32": []}
    for _ in range(rounds):
        for mode in times:
            apply_precision(device, mode)
            times[mode].append(_p50(model, x, device)[0])
    apply_precision(device, "ieee")
    speedup = statistics.median(a / b for a, b in zip(times["ieee"], times["tf32"]))
    return {"p50_ms": times, "checks": [
        check(f"ResNet-50 b{batch}: TF32 speed-up over IEEE fp32", f"{speedup:.2f}x",
              "(reported: why the sweep fixes it)", True,
              "matmuls and convolutions both; the sweep default is IEEE")]}


def amp(device, rounds: int, quick: bool) -> dict:
    """AMP as the engine runs it: autocast over fp32 weights in NCHW, and as deployed."""
    import copy

    import torch

    from benchmarks.measure.environment import apply_precision
    from optimizers.precision import autocast
    dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    name = str(dtype).removeprefix("torch.")
    apply_precision(device, "ieee")
    out = {}
    checks = []
    for arch, batch in (("resnet18", 128), ("resnet50", 64)):
        b, size = _shape(device, quick, batch)
        model = _resnet(arch, device)
        x = torch.randn(b, 3, size, size, device=device)
        deployed = copy.deepcopy(model).to(dtype=dtype, memory_format=torch.channels_last)
        x_cl = x.contiguous(memory_format=torch.channels_last)
        series = {"fp32": [], "autocast_nchw": [], "deployed_channels_last": []}
        for _ in range(rounds):
            series["fp32"].append(_p50(model, x, device)[0])
            series["autocast_nchw"].append(_p50(model, x, device, autocast(device.type, dtype))[0])
            series["deployed_channels_last"].append(
                _p50(deployed, x_cl, device, autocast(device.type, dtype))[0])
        med = {k: statistics.median(v) for k, v in series.items()}
        out[arch] = {"batch": b, "size": size, "p50_ms": series}
        best = med["fp32"] / med["deployed_channels_last"]
        checks.append(check(
            f"{arch} b{b} {size}x{size}: AMP {name} (cast once, channels-last) over IEEE fp32",
            f"{best:.2f}x", ">= 2x on CUDA (ResNet-50)" if arch == "resnet50" else "(reported)",
            best >= 2 or arch != "resnet50" or device.type != "cuda",
            f"autocast over fp32 weights in NCHW: {med['fp32'] / med['autocast_nchw']:.2f}x"))
    out["checks"] = checks
    return out


def _cli(args: list[str], tmp: str, timeout: float) -> subprocess.CompletedProcess:
    env = {"COMPRESSION_BENCH_CACHE": f"{tmp}/cache", "COMPRESSION_BENCH_STORE": f"{tmp}/s.db"}
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout)


def _failure(proc: subprocess.CompletedProcess) -> str:
    return (proc.stderr.strip().splitlines() or ["?"])[-1][:300]


def sweep(device, quick: bool) -> dict:
    """A real sweep through the CLI: distillation, QAT and channel pruning train on the
    device asked for, INT8 variants say they ran on the CPU."""
    try:
        import torch_pruning  # noqa: F401
        method, pruning_note = "channel", ""
    except ImportError:
        method, pruning_note = "l1", "torch-pruning is not installed here: l1 instead of channel"
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/sweep.json"
        args = ["run", "--device", device.type, "--prune", "0.5", "--prune-method", method,
                "--distill", "--int8", "static,qat", "--amp", "--json", out, "--quiet",
                "--no-cache", "--epochs", "1" if quick else "3", "--min-time",
                "0.1" if quick else "0.3"]
        t0 = time.perf_counter()
        proc = _cli(args, tmp, STEP_TIMEOUT_S)
        wall = time.perf_counter() - t0
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"the sweep failed ({proc.returncode}): {_failure(proc)}")
        doc = json.loads(Path(out).read_text())
    variants = doc["variants"]
    placed = {v["name"]: v["device"] for v in variants}
    expected = {v["name"]: "cpu" if "int8" in v["techniques"] else device.type
                for v in variants}
    wrong = [f"{n} on {d}, expected {expected[n]}" for n, d in placed.items()
             if d.split(":")[0] != expected[n]]
    errors = [f"{v['name']}: {v['error']}" for v in variants if v.get("error")]
    no_peak = [v["name"] for v in variants if not v.get("error")
               and v.get("percent_of_peak") is None]
    trained = [v["name"] for v in variants if v["techniques"] in (
        ["distill"], ["student-scratch"], ["prune"]) or v["config"].get("int8", {}).get(
        "mode") == "qat"]
    return {"variants": [{k: v.get(k) for k in ("name", "device", "accuracy", "memory_method",
                                                 "launch_bound")} for v in variants],
            "checks": [
                check(f"sweep --device {device.type} (prune {method}, distill, int8 static and "
                      f"qat, amp): every variant succeeds",
                      f"{len(variants) - len(errors)}/{len(variants)}", "all", not errors,
                      f"{wall:.0f} s; trained on {device.type}: {', '.join(trained)}"
                      + (f"; {pruning_note}" if pruning_note else "")
                      + (f"; failed: {'; '.join(errors)}" if errors else "")),
                check("INT8 variants labelled cpu, the others the device asked for",
                      ", ".join(f"{n}: {d}" for n, d in placed.items()), "as labelled",
                      not wrong, "; ".join(wrong)),
                check("every variant placed on the roofline (% of its device's peak)",
                      f"{len(variants) - len(no_peak)}/{len(variants)}", "all",
                      not no_peak, ", ".join(no_peak))]}


def runtimes(device, quick: bool) -> dict:
    """The seed CNN's baseline under eager, compile and (where onnxruntime is installed)
    ort, at batch 1 and 32 on the device: each cell timed with CUDA events on a GPU, its
    energy per inference where NVML is readable (an empty column elsewhere)."""
    from importlib.util import find_spec
    names = ["eager", "compile"] + (["ort"] if find_spec("onnxruntime") else [])
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/runtimes.json"
        args = ["run", "--device", device.type, "--runtime", ",".join(names),
                "--eval-batch-size", "1,32", "--epochs", "1", "--json", out, "--quiet",
                "--no-cache", "--min-time", "0.1" if quick else "0.3"]
        proc = _cli(args, tmp, STEP_TIMEOUT_S)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"the runtime sweep failed ({proc.returncode}): "
                               f"{_failure(proc)}")
        variants = json.loads(Path(out).read_text())["variants"]
    cells = {v["name"]: v for v in variants}
    failed = {n: v["error"] for n, v in cells.items() if v.get("error")}
    torch_cells = [v for v in variants if (v.get("runtime") or {}).get("name") in
                   ("eager", "compile") and not v.get("error")]
    on_device = [v["name"] for v in torch_cells if v["device"].split(":")[0] == device.type]
    events = [v["name"] for v in torch_cells if device.type != "cuda"
              or v.get("launch_bound") is not None]  # host and event times: CUDA events
    energy = {n: (v.get("energy") or {}).get("joules_per_inference") for n, v in cells.items()}
    measured = {n: e for n, e in energy.items() if e is not None}
    ort = [v for v in variants if (v.get("runtime") or {}).get("name") == "ort"]
    ort_note = "; ".join(f"{v['name']}: " + (v.get("error") or (v["runtime"].get("details")
                                                                or {}).get("provider", "?"))
                         for v in ort) or "onnxruntime not installed here"
    return {"cells": [{k: v.get(k) for k in ("name", "device", "runtime", "energy",
                                             "launch_bound")} for v in variants],
            "checks": [
                check(f"runtime cells on {device.type}: eager and compile at b1 and b32 run",
                      f"{len(torch_cells)} of 4", "4", len(torch_cells) == 4,
                      "; ".join(f"{n}: {e}" for n, e in failed.items())),
                check("eager and compile cells on the device, timed with its clock",
                      f"{len(set(on_device) & set(events))} of {len(torch_cells)}", "all",
                      set(on_device) == set(events) == {v["name"] for v in torch_cells},
                      f"ort: {ort_note}"),
                check("energy per inference (NVML) where readable",
                      ", ".join(f"{n}: {e:.3g} J" for n, e in measured.items()) or
                      "no counter readable: empty column",
                      "measured on a GPU with NVML; empty elsewhere",
                      bool(measured) or device.type != "cuda" or find_spec("pynvml") is None)]}


def ddp(device, quick: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/ddp.json"
        proc = _cli(["distributed", "--device", device.type, "--workers", "1", "--compression",
                     "none,fp16", "--steps", "10" if quick else "30", "--no-store", "--json",
                     out], tmp, STEP_TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeError(f"distributed failed ({proc.returncode}): {_failure(proc)}")
        runs = {r["compression"]: r for r in json.loads(Path(out).read_text())["runs"]}
    ratio = runs["fp16"]["bytes_per_step"] / runs["none"]["bytes_per_step"]
    backend = runs["none"]["backend"]
    return {"runs": list(runs.values()), "checks": [
        check(f"DDP over {backend}, 1 worker: fp16 bytes per step / none", ratio, "0.5",
              ratio == 0.5, ", ".join(f"{c}: {r.get('throughput') or 0:,.0f} samples/s, "
                                      f"comm {r.get('comm_ms_per_step') or 0:.2f} ms/step"
                                      for c, r in runs.items()))]}


def _peaks(device, rounds: int) -> dict:
    from tools.perf_peaks import peaks
    return peaks(rounds, device.type)


def render(results: dict, env: dict) -> str:
    lines = [f"GPU checks (`make perf-gpu`) on {env.get('device_name') or env.get('cpu')}, "
             f"torch {env.get('torch')} (project pin 2.14.1), CUDA {env.get('cuda')}, driver "
             f"{env.get('driver')}.", "", "| target | measured | threshold | met |",
             "|---|---|---|---|"]
    for name, section in results.items():
        lines += check_rows(name, section)
    return "\n".join(lines) + "\n"


def summary(results: dict) -> str:
    """One screen: each check, met or not."""
    lines = []
    for name, section in results.items():
        if "error" in section:
            lines.append(f"  FAIL  {name}: {section['error']}")
        for c in section.get("checks", []):
            lines.append(f"  {'pass' if c['ok'] else 'FAIL'}  {name}: {c['target']} = "
                         f"{c['measured']} ({c['threshold']})")
    return "\n".join(lines)


# What each section times, for --dry-run's list (the module's docstring says it at length).
CELLS = {"timing": "CUDA-event p50 against torch.utils.benchmark (ResNet-18), launch-bound check",
         "memory": "a variant's peak memory alone and beside a resident model",
         "fp32": "ResNet-50 with TF32 off and on",
         "amp": "ResNet-18/50 under autocast fp16 against IEEE fp32 (target >= 2x at b64)",
         "sweep": "a --device cuda sweep: distillation, QAT, channel pruning; INT8 on the CPU",
         "runtimes": "seed CNN: eager, torch.compile, ONNX Runtime CUDA; energy from NVML",
         "ddp": "DDP over NCCL, fp16 compression's bytes per step",
         "peaks": "GEMM per precision and copy bandwidth: the roofline's peaks"}


def dry_run_lines(results: dict, carried: dict) -> list[str]:
    """The cells as this run left them, and what a lent machine would be given."""
    lines = ["gpu_check --dry-run: the cells"]
    for name, what in CELLS.items():
        state = results.get(name, {})
        ran = f"error: {state['error']}" if "error" in state else "ran on the CPU"
        lines.append(f"  {name}: {what} ({ran})")
    lines.append("gpu_check --dry-run: carried to the lent machine (its Python lacks them)")
    for w in carried["wheels"]:
        lines.append(f"  {w['name']}: " + (f"{w['file']}, {w['bytes'] / 2**20:.1f} MiB"
                                            if "error" not in w else w["error"]) +
                     f" ({w['why']})")
    lines.append(f"  total {carried['total_bytes'] / 2**20:.1f} MiB of "
                 f"{carried['limit_bytes'] / 2**20:.0f} MiB: "
                 f"{'fits' if carried['fits'] else 'does not fit'}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.gpu_check")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--output", type=Path, default=ROOT / "results")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S,
                        help="seconds for the whole run; sections past it are skipped")
    parser.add_argument("--quick", action="store_true",
                        help="small shapes and budgets (what the tests run on the CPU)")
    parser.add_argument("--dry-run", action="store_true",
                        help="the same script on the CPU (--device cpu --quick), then every "
                             "cell and the wheels a lent machine would be given, with sizes")
    args = parser.parse_args(argv)
    if args.dry_run:
        args.device, args.quick = "cpu", True
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here (torch.cuda.is_available() is False); run it on "
              "a GPU machine, or pass --device cpu", file=sys.stderr)
        return 2
    if args.rounds < 1:
        print(f"gpu_check: --rounds must be at least 1, got {args.rounds}", file=sys.stderr)
        return 2
    from benchmarks.measure.environment import environment_card, quiet_library_noise
    quiet_library_noise()
    device = torch.device("cuda:0" if args.device == "cuda" else "cpu")
    env = environment_card(device)
    sections = {
        "timing": lambda: timing(device, args.rounds, args.quick),
        "memory": lambda: memory(device, args.quick),
        "fp32": lambda: fp32(device, args.rounds, args.quick),
        "amp": lambda: amp(device, args.rounds, args.quick),
        "sweep": lambda: sweep(device, args.quick),
        "runtimes": lambda: runtimes(device, args.quick),
        "ddp": lambda: ddp(device, args.quick),
        "peaks": lambda: _peaks(device, args.rounds),
    }
    args.output.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    start = time.monotonic()
    for name, run in sections.items():
        left = args.budget - (time.monotonic() - start)
        if left < 20:
            results[name] = {"error": f"skipped: the run's {args.budget:.0f} s budget is spent"}
        else:
            print(f"gpu_check: {name} ...", file=sys.stderr, flush=True)
            t0 = time.monotonic()
            try:
                with time_limit(min(STEP_TIMEOUT_S + 30, left), f"section {name}"):
                    results[name] = run()
            except Exception as exc:  # one broken section must not hide the others' figures
                results[name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            results[name]["wall_s"] = round(time.monotonic() - t0, 1)
        # Written after every section: a run cut off later keeps what it measured.
        (args.output / "gpu.json").write_text(json.dumps(
            {"environment": env, "results": results}, indent=2, default=str))
        (args.output / "gpu.md").write_text(render(results, env))
    print(summary(results), file=sys.stderr)
    if args.dry_run:
        carried = carry(args.output / "carry")
        (args.output / "gpu.json").write_text(json.dumps(
            {"environment": env, "results": results, "carry": carried,
             "cells": CELLS}, indent=2, default=str))
        print("\n".join(dry_run_lines(results, carried)), file=sys.stderr)
        broken = [name for name, section in results.items() if "error" in section]
        return 0 if carried["fits"] and not broken else 1
    failed = unmet(results)
    print(f"gpu_check: {len(failed)} not met; figures in {args.output / 'gpu.md'} "
          f"({time.monotonic() - start:.0f} s)", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
