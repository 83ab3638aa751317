"""``make perf``: the speed targets of the issues, measured side by side in one run.

This machine is shared and noisy, so every target is a ratio of two things measured in the
same run, or a median of repeats; nothing here is a timed unit test. Writes
``docs/PERFORMANCE.md`` and the raw figures to ``results/perf.json``.

    python -m tools.perf [--only SECTION ...] [--repeats N]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "docs" / "PERFORMANCE.md"
SECTIONS = ("fidelity", "bench", "resnet", "catalogue", "distributed", "dashboard")
DEFAULT_SWEEP = ["--prune", "0.5", "--distill", "--temperature", "4", "--amp", "--int8",
                 "static", "--combine"]


def _cli(args: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    return time.perf_counter() - t0, proc


def check(name: str, measured, target: str, ok: bool, note: str = "") -> dict:
    return {"target": name, "measured": measured, "threshold": target, "ok": bool(ok),
            "note": note}


def check_rows(name: str, section: dict) -> list[str]:
    """A section's checks as rows of the | target | measured | threshold | met | table."""
    rows = [f"| {name} | failed: {section['error']} | | **no** |"] if "error" in section else []
    for c in section.get("checks", []):
        note = f" ({c['note']})" if c["note"] else ""
        rows.append(f"| {c['target']}{note} | {c['measured']} | {c['threshold']} | "
                    f"{'yes' if c['ok'] else '**no**'} |")
    return rows


def unmet(results: dict) -> list[str]:
    """The checks that failed and the sections that broke, by name."""
    return ([c["target"] for s in results.values() for c in s.get("checks", []) if not c["ok"]]
            + [name for name, s in results.items() if "error" in s])


# -- issue 2: latency fidelity, repeatability, overhead ------------------------------------

def fidelity(repeats: int) -> dict:
    import torch
    import torchvision
    from torch.utils import benchmark

    from benchmarks.environment import default_threads
    from benchmarks.measure import measure_latency, pinned_threads
    from benchmarks.results import LatencyStats

    threads = default_threads()
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).eval()
    x = torch.randn(32, 3, 64, 64)
    engine_p50, timer_median, overhead = [], [], []
    with pinned_threads(threads):
        for _ in range(repeats):  # interleaved, so drift hits both alike
            tracker = measure_latency(model, x, torch.device("cpu"), min_time_s=1.0)
            engine_p50.append(LatencyStats.from_samples(tracker.samples_ms, 32).p50)
            overhead.append(tracker.wall_s * 1000 / sum(tracker.samples_ms))
            with torch.inference_mode():
                timer = benchmark.Timer("m(x)", globals={"m": model, "x": x},
                                        num_threads=threads)
                timer_median.append(timer.blocked_autorange(min_run_time=1.0).median * 1000)
    ratios = [a / b for a, b in zip(engine_p50, timer_median)]
    ratio = statistics.median(ratios)
    cv = statistics.pstdev(engine_p50) / statistics.mean(engine_p50)
    timer_cv = statistics.pstdev(timer_median) / statistics.mean(timer_median)
    over = statistics.median(overhead)
    return {
        "threads": threads, "engine_p50_ms": engine_p50, "timer_median_ms": timer_median,
        "checks": [
            check("ResNet-18 b32 3x64x64: engine p50 / Timer.blocked_autorange median",
                  round(ratio, 3), "0.90-1.10", 0.9 <= ratio <= 1.1,
                  f"median of {repeats} interleaved pairs; {threads} thread(s)"),
            check("engine p50 coefficient of variation over repeats", f"{cv:.1%}", "<= 5%",
                  cv <= 0.05, f"torch's Timer over the same interleaved repeats: {timer_cv:.1%}, "
                              f"the machine's own variation"),
            check("latency phase wall time / sum of timed samples", round(over, 2), "<= 1.5",
                  over <= 1.5, "warm-up included"),
        ]}


# -- issues 2 and 3: the default sweep, cold and warm --------------------------------------

def bench() -> dict:
    out: dict = {"checks": []}
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "COMPRESSION_BENCH_CACHE": f"{tmp}/cache",
               "COMPRESSION_BENCH_STORE": f"{tmp}/store.db"}
        base_json = f"{tmp}/base.json"
        cold, p = _cli(["run", "--json", base_json, "--quiet"], env)
        warm, p2 = _cli(["run", "--json", base_json, "--quiet"], env)
        if p.returncode or p2.returncode:
            raise RuntimeError(f"baseline run failed: {p.stderr[-500:]} {p2.stderr[-500:]}")
        acc = json.loads(Path(base_json).read_text())["variants"][0]["accuracy"]
        out["checks"] += [
            check("`python -m benchmarks run` (seed_cnn, digits) cold, start-up included",
                  f"{cold:.1f} s", "<= 30 s", cold <= 30),
            check("the same, warm (cached baseline)", f"{warm:.1f} s", "<= 8 s", warm <= 8),
            check("baseline accuracy", f"{acc:.2%}", ">= 97%", acc >= 0.97),
        ]
        env["COMPRESSION_BENCH_CACHE"] = f"{tmp}/cache2"
        full_json = f"{tmp}/full.json"
        cold_full, p = _cli(["run", *DEFAULT_SWEEP, "--json", full_json, "--quiet"], env)
        warm_full, p2 = _cli(["run", *DEFAULT_SWEEP, "--json", full_json, "--quiet"], env)
        report = json.loads(Path(full_json).read_text())
        out["sweep"] = [{k: v.get(k) for k in ("name", "device", "accuracy", "size_mb",
                                                "size_gzip_mb", "params", "nonzero_params",
                                                "error")} | {"p50_ms": (v.get("latency_ms")
                                                             or {}).get("p50")}
                        for v in report["variants"]]
        out["stdout"] = p2.stdout
    v = {x["name"]: x for x in report["variants"]}
    base = v["baseline"]
    errors = [n for n, x in v.items() if x["error"]]
    int8 = v["int8-static"]
    amp = next(x for n, x in v.items() if x["techniques"] == ["amp"])
    prune = next(x for n, x in v.items() if x["techniques"] == ["prune"])
    distill = next(x for n, x in v.items() if x["techniques"] == ["distill"])
    scratch = v["student-scratch"]
    nonzero = 1 - prune["config"]["prune"]["effective_sparsity"]
    out["checks"] += [
        check("default sweep (" + " ".join(DEFAULT_SWEEP) + "): every variant succeeds",
              f"{len(v) - len(errors)}/{len(v)}", "all", not errors, ", ".join(errors)),
        check("default sweep cold, start-up included", f"{cold_full:.1f} s", "(no target)", True),
        check("default sweep warm", f"{warm_full:.1f} s", "<= 90 s", warm_full <= 90),
        check("INT8 static size / baseline", round(int8["size_mb"] / base["size_mb"], 3),
              "<= 0.3", int8["size_mb"] <= 0.3 * base["size_mb"]),
        check("INT8 static accuracy change", f"{(int8['accuracy'] - base['accuracy']) * 100:+.2f}"
              " pt", "within 1 pt", abs(int8["accuracy"] - base["accuracy"]) <= 0.01),
        check("AMP accuracy change", f"{(amp['accuracy'] - base['accuracy']) * 100:+.2f} pt",
              "within 1 pt", abs(amp["accuracy"] - base["accuracy"]) <= 0.01),
        check("l1 0.5: prunable weights left non-zero", f"{nonzero:.1%}", "<= 52%",
              nonzero <= 0.52),
        check("l1 0.5: gzipped size / baseline",
              round(prune["size_gzip_mb"] / base["size_gzip_mb"], 3), "< 1",
              prune["size_gzip_mb"] < base["size_gzip_mb"]),
        check("distilled student vs the same student from scratch (accuracy)",
              f"{distill['accuracy']:.2%} vs {scratch['accuracy']:.2%}", "reported side by side",
              True),
    ]
    return out


# -- issue 3: ResNet-18 channel pruning and INT8 speed-ups ---------------------------------

def resnet(repeats: int = 5) -> dict:
    """The engine's sweep gives the figures a user sees; the speed-ups are then re-timed in
    interleaved rounds (baseline, pruned, INT8 on each engine, in turn), because a ratio of
    two timings taken a minute apart carries this host's drift (it moved 2.3x to 3.0x)."""
    import torch

    from optimizers.quantization import static_fx
    from benchmarks.cache import WeightsCache
    from benchmarks.environment import default_threads
    from benchmarks.measure import measure_latency, pinned_threads
    from benchmarks.results import LatencyStats
    from benchmarks.runner import prepare_sweep
    from benchmarks.specs import BASELINE, Int8Settings, PruneSettings, SweepSpec, VariantSpec

    spec = SweepSpec(model="resnet18", dataset="synthetic", input_shape=(3, 64, 64),
                     batch_size=32, variants=(
                         BASELINE,
                         VariantSpec("prune-channel-0.5", ("prune",),
                                     prune=PruneSettings(0.5, "channel", 0)),
                         VariantSpec("int8-static", ("int8",), int8=Int8Settings("static", 4))))
    with tempfile.TemporaryDirectory() as tmp:
        sweep = prepare_sweep(spec, cache=WeightsCache(tmp))
        results = {r.name: r for r in sweep.run()}
        for r in results.values():
            if r.error:
                raise RuntimeError(f"{r.name}: {r.error}")
        ctx = sweep.context(lambda *_: None)
        models = {"baseline": sweep.baseline,
                  "prune-channel-0.5": sweep.build_variant(spec.variants[1], ctx).model}
        # The engine's INT8 path, and for reference every x86 INT8 engine PyTorch offers.
        calib = [sweep.example for _ in range(4)]
        previous = torch.backends.quantized.engine
        engines = [e for e in ("x86", "fbgemm", "onednn")
                   if e in torch.backends.quantized.supported_engines]
        for engine in engines:
            torch.backends.quantized.engine = engine
            models[f"int8-{engine}"] = static_fx(copy.deepcopy(sweep.baseline).cpu().eval(),
                                                 calib)
        p50 = {name: [] for name in models}
        with pinned_threads(default_threads()):
            for _ in range(repeats):
                for name, model in models.items():
                    if name.startswith("int8-"):
                        torch.backends.quantized.engine = name.removeprefix("int8-")
                    t = measure_latency(model, sweep.example, torch.device("cpu"),
                                        min_time_s=0.5)
                    p50[name].append(LatencyStats.from_samples(t.samples_ms, 32).p50)
        torch.backends.quantized.engine = previous

    def speedup(name: str) -> float:  # median over rounds of baseline / variant, same round
        return statistics.median(b / v for b, v in zip(p50["baseline"], p50[name]))

    base, pruned, int8 = (results[n] for n in ("baseline", "prune-channel-0.5", "int8-static"))
    int8_cfg = int8.config.get("int8", {})
    engine_int8 = f"int8-{int8_cfg.get('engine', 'x86')}"
    reference = {e: speedup(f"int8-{e}") for e in engines}
    best_engine = max(reference, key=reference.get)
    params = pruned.params / base.params
    sweep_note = (f"the sweep's own figures, timed in sequence: channel "
                  f"{base.latency.p50 / pruned.latency.p50:.2f}x, INT8 "
                  f"{base.latency.p50 / int8.latency.p50:.2f}x")
    return {
        "p50_ms": {k: r.latency.p50 for k, r in results.items()},
        "interleaved_p50_ms": p50,
        "checks": [
            check("ResNet-18 b32 3x64x64 CPU: channel 0.5 speed-up",
                  f"{speedup('prune-channel-0.5'):.2f}x", ">= 2.5x",
                  speedup("prune-channel-0.5") >= 2.5,
                  f"median of {repeats} interleaved rounds; {sweep_note}"),
            check("channel 0.5 parameters / baseline", f"{params:.1%}", "<= 30%", params <= 0.3),
            check(f"static INT8 speed-up (engine's path: {int8_cfg.get('path', '?')}, engine "
                  f"{int8_cfg.get('engine', '?')})", f"{speedup(engine_int8):.2f}x", ">= 3x",
                  speedup(engine_int8) >= 3.0, f"median of {repeats} interleaved rounds"),
            check(f"reference: best INT8 engine here (FX, engine {best_engine})",
                  f"{reference[best_engine]:.2f}x", "(reference)", True,
                  ", ".join(f"{k} {v:.2f}x" for k, v in reference.items())),
        ]}


# -- issue 13: torchvision and timm models at ImageNet's resolution -------------------------

def catalogue() -> dict:
    """torchvision's ResNet-50 and timm's ResNet-18 through the engine on synthetic 3x224x224
    batches of 16: channel pruning and static INT8 both run, and the speed-ups are the
    sweep's own interleaved timings (every variant timed in the same rounds)."""
    from benchmarks.cache import WeightsCache
    from benchmarks.runner import prepare_sweep
    from benchmarks.specs import BASELINE, Int8Settings, PruneSettings, SweepSpec, VariantSpec

    variants = (BASELINE,
                VariantSpec("prune-channel-0.5", ("prune",),
                            prune=PruneSettings(0.5, "channel", 0)),
                VariantSpec("int8-static", ("int8",), int8=Int8Settings("static", 2)))
    checks, figures = [], {}
    for model in ("torchvision:resnet50", "timm:resnet18"):
        spec = SweepSpec(model=model, dataset="synthetic", input_shape=(3, 224, 224),
                         batch_size=16, variants=variants, min_time_s=3.0)
        with tempfile.TemporaryDirectory() as tmp:
            results = {r.name: r for r in prepare_sweep(spec, cache=WeightsCache(tmp)).run()}
        errors = [f"{name}: {r.error}" for name, r in results.items() if r.error]
        if errors:
            raise RuntimeError(f"{model}: {'; '.join(errors)}")
        base = results["baseline"]
        speedup = {n: base.latency.p50 / r.latency.p50 for n, r in results.items()}
        figures[model] = {n: r.latency.p50 for n, r in results.items()}
        params = results["prune-channel-0.5"].params / base.params
        note = (f"{results['baseline'].timing.get('method')} timing, "
                f"{results['baseline'].timing.get('rounds')} rounds; parameters {params:.1%}; "
                f"static INT8 {speedup['int8-static']:.2f}x")
        if model == "torchvision:resnet50":
            checks.append(check("ResNet-50 (torchvision) b16 3x224x224 CPU: channel 0.5 "
                                "speed-up", f"{speedup['prune-channel-0.5']:.2f}x", ">= 2x",
                                speedup["prune-channel-0.5"] >= 2.0, note))
        else:
            checks.append(check(f"{model} b16 3x224x224: channel 0.5 and static INT8 run",
                                f"{speedup['prune-channel-0.5']:.2f}x (channel)", "runs",
                                True, note))
    return {"p50_ms": figures, "checks": checks}


# -- issue 5: distributed --------------------------------------------------------------------

def distributed() -> dict:
    from benchmarks.distributed.launcher import DistributedConfig, run_distributed
    config = DistributedConfig(workers=(1, 2), compressions=("none", "fp16"))
    t0 = time.perf_counter()
    runs = run_distributed(config, warn=lambda text: None)
    wall = time.perf_counter() - t0
    by = {(r["workers"], r["compression"]): r for r in runs}
    errors = [r["name"] for r in runs if r.get("error")]
    ratio = by[(2, "fp16")]["bytes_per_step"] / by[(2, "none")]["bytes_per_step"]
    return {
        "runs": [{k: r.get(k) for k in ("name", "throughput", "scaling_efficiency",
                                         "bytes_per_step", "comm_ms_per_step", "step_ms",
                                         "loss", "accuracy", "error")} for r in runs],
        "checks": [
            check("DDP (gloo) 1 and 2 workers x none/fp16 on digits, together", f"{wall:.1f} s",
                  "<= 120 s", wall <= 120 and not errors, ", ".join(errors)),
            check("fp16 bytes per step / none", round(ratio, 3), "0.5", abs(ratio - 0.5) < 0.01),
        ]}


# -- issues 4 and 6: the dashboard in a real browser ---------------------------------------

def dashboard() -> dict:
    from .perf_ui import measure_dashboard
    return measure_dashboard()


NOTES = """## Notes on the figures

- **First page drawn (issue 4).** The server is healthy in about 0.9 s; the rest is Chromium
  on two cores loading Streamlit's per-widget code while the server answers on the same cores.
  What closed the gap (it read 3.7-4.9 s before): Streamlit's file watcher is off
  (`fileWatcherType = "none"` in `.streamlit/config.toml`). Without the watchdog package it
  polls every imported module's file for edits, which on two cores made every page load about
  a second slower (measured side by side: 3.0 s against 2.0 s per load, median of 6); a
  dashboard that users run does not need to rerun on save. The menus also stopped importing
  numpy (the data-set list lives in `benchmarks/specs.py`), which the first page's script
  paid for. Earlier: the checkpoint uploader sits behind a toggle and the worker's start
  (importing torch) waits until the page has drawn. The figure is a median of three starts of
  a fresh server and browser context, alternated with a one-button Streamlit app as the floor.
- **Scaling efficiency below 1 on this machine** is expected: two workers share two cores with
  the launcher, each on one thread, against one worker on one thread; the figure is for the
  ratio's method, the GPU machine is where scaling shows.
- **Distilled student beside its scratch twin**: on digits, at this budget, the teacher adds
  nothing measurable to the narrow student's accuracy; the control makes that visible rather
  than assumed.
- **Noise**: latency is flagged noisy (`~`) when IQR/median exceeds 10%. On this VM the
  host moves whole stretches of time by up to 20%: a plain 512x512 matmul loop, nothing else
  running, stepped from 36 to 43 ms per block mid-run (CV 7%). The engine/Timer ratio, measured
  interleaved, stays within a few percent through that; the CV of the p50 across repeats does
  not. That row now prints, beside the engine's CV, the CV of torch's own `Timer` over the
  same interleaved repeats: in the runs of 2026-11-30 the pairs (engine, Timer) read
  (6.7%, 5.3%), (3.0%, 9.3%) and (8.9%, 12.8%), so the spread is the machine's, not the
  engine's. Every target is therefore a ratio measured side by side or a median of
  interleaved repeats (the ResNet-18 speed-ups too: the sweep's own sequential figures are
  shown beside them), and the CV row is the one to re-read on a quieter machine.
"""


def render(results: dict, env: dict) -> str:
    lines = ["# Performance", "",
             "Written by `make perf` (`python -m tools.perf`); raw figures in "
             "`results/perf.json`. Each target is a ratio of two things measured side by side "
             "in one run, or a median of repeats: the machine is shared and noisy.", "",
             f"Measured {env['created_at']} on {env['cpu']} ({env['cpu_count']} cores, "
             f"{env['threads']} pinned), torch {env['torch']}, commit {env['git_commit']}.", "",
             "The measurements behind the techniques' choices (FX against pt2e, the quantized "
             "engines, torchao's dynamic path, channel pruning per model) are in "
             "`docs/optimizers.md`. The GPU's figures come from `make perf-gpu` "
             "(`benchmarks/gpu_check.py`, into `results/gpu.md`) on a lent GPU machine; none "
             "was lent for this run: the CUDA paths are tested on the CPU where they can be "
             "and skipped where only a GPU shows them.", ""]
    titles = {"fidelity": "Latency fidelity (issue 2)",
              "bench": "The default sweep: seed_cnn on digits (issues 2 and 3)",
              "resnet": "ResNet-18 speed-ups (issue 3)",
              "catalogue": "torchvision and timm models at 224 (issue 13)",
              "distributed": "Data-parallel training (issue 5)",
              "dashboard": "Dashboard (issues 4 and 6)"}
    for name, section in results.items():
        lines += [f"## {titles.get(name, name)}", "", "| target | measured | threshold | met |",
                  "|---|---|---|---|"]
        lines += check_rows(name, section)
        if name == "bench" and "stdout" in section:
            lines += ["", "The warm run's table:", "", "```", section["stdout"].rstrip(), "```"]
        if name == "distributed" and "runs" in section:
            lines += ["", "| run | samples/s | efficiency | bytes/step | comm ms/step | "
                      "accuracy |", "|---|---|---|---|---|---|"]
            for r in section["runs"]:
                eff = "-" if r["scaling_efficiency"] is None else f"{r['scaling_efficiency']:.2f}"
                lines.append(f"| {r['name']} | {r['throughput'] or 0:.0f} | {eff} | "
                             f"{r['bytes_per_step']} | {r['comm_ms_per_step'] or 0:.2f} | "
                             f"{r['accuracy'] or 0:.3f} |")
        lines.append("")
    lines.append(NOTES)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.perf")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    from benchmarks.environment import default_threads, environment_card, quiet_library_noise
    quiet_library_noise()
    env = environment_card(threads=default_threads())
    results = {}
    for name in args.only:
        print(f"perf: {name} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        try:
            results[name] = (globals()[name](args.repeats) if name in ("fidelity", "resnet")
                             else globals()[name]())
        except Exception as exc:  # one broken section must not hide the others' figures
            results[name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                             if str(exc) else type(exc).__name__}
        print(f"perf: {name} done in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    # The raw figures go beside the report: a partial run (--only, --output elsewhere) must
    # not overwrite the full run's results/perf.json.
    output = Path(args.output)
    raw = (ROOT / "results" / "perf.json" if output.resolve() == DEFAULT_OUTPUT
           else output.with_suffix(".json"))
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps({"environment": env, "results": results}, indent=2, default=str))
    output.write_text(render(results, env))
    failed = unmet(results)
    for f in failed:
        print(f"perf: not met: {f}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
