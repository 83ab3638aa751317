"""A sweep timed again under each instruction-set profile (``benchmarks.spec.isa``): another
CPU's verdict previewed on this machine (issue 34.5).

oneDNN reads its cap once, at its first dispatch, so each capped profile runs the sweep in a
process of its own (``python -m benchmarks.run.profiles SPEC OUT``, ``ONEDNN_MAX_CPU_ISA``
set), its variants from the weights cache the native sweep filled (nothing retrains), every
row and its baseline timed together in that process's interleaved rounds: a profile's
speed-ups are against its own baseline, never across profiles. Each row is named
``variant [profile]`` and its ``runtime.profile`` says its cap and whether it is a preview
(a cap below this CPU's widest) or this machine's own figure, and carries the roofs measured
under the cap in that process (``runtime.profile.peaks``, kept per machine and cap): a
preview's % peak is against the capped roof, never the native one. A runtime that does not
obey the cap (ONNX Runtime's MLAS) gets one failed row per variant saying so; a profile whose
process fails, one failed row per variant with its last line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.measure import precisions
from benchmarks.report.records import Timing
from benchmarks.report.results import VariantResult
from benchmarks.run.cells import deployed_precision
from benchmarks.spec.isa import HONOURED_BY, NATIVE, get, label

# PyTorch's own runtimes: their float kernels (oneDNN) obey the cap, their INT8 ones do not.
TORCH_RUNTIMES = ("eager", "compile", "compile-freeze")


def profile_name(name: str, profile: str) -> str:
    return f"{name} [{profile}]"


def mark_native(results: list[VariantResult]) -> None:
    """The native sweep's rows, labelled as the machine as it is."""
    for r in results:
        entry = dict(r.runtime or {"name": "eager", "variant": r.name})
        entry["profile"] = label(NATIVE)
        r.runtime = entry


def _refused(spec, profile: str, why: str, runtimes=None, like=None) -> list[VariantResult]:
    """One failed row per variant (and runtime), at the batch size and threads of ``like``
    (a native row), so it sits in its profile's grid."""
    rows = []
    for v in spec.variants:
        for runtime in ("eager",) if runtimes is None else runtimes:
            name = v.name if runtime == "eager" else f"{v.name}@{runtime}"
            entry = {"name": runtime, "variant": v.name, "profile": label(profile)}
            if like is not None:
                entry["threads"] = (like.runtime or {}).get("threads")
            rows.append(VariantResult(
                name=profile_name(name, profile), techniques=list(v.techniques),
                error=why, runtime=entry, timing=Timing(
                    batch_size=like.timing.batch_size if like is not None else spec.batch_size)))
    return rows


def run_profile(spec, profile: str, *, cache_enabled: bool = True,
                timeout_s: float | None = None, like=None) -> list[VariantResult]:
    """The rows of ``spec`` timed under ``profile`` (not native), in a process of its own;
    ``like``: a native row, whose batch size and threads a failed row takes."""
    capped = get(profile)
    honoured = tuple(r for r in spec.runtimes if r in HONOURED_BY)
    ignored = [r for r in spec.runtimes if r not in HONOURED_BY]
    rows = _refused(spec, profile, "", ignored, like)
    for row in rows:
        runtime = row.runtime["name"]
        row.error = (f"{runtime} does not obey an instruction-set cap (its kernels dispatch on "
                     f"the CPU's own flags): no {profile} preview of it")
    child = dataclasses.replace(spec, isa=(), runtimes=honoured)
    with tempfile.TemporaryDirectory(prefix="compression-bench-isa-") as tmp:
        spec_file, out_file = Path(tmp) / "spec.json", Path(tmp) / "rows.json"
        spec_file.write_text(json.dumps(child.to_dict()))
        env = {**os.environ, "ONEDNN_MAX_CPU_ISA": capped.cap, "DNNL_MAX_CPU_ISA": capped.cap}
        command = [sys.executable, "-m", "benchmarks.run.profiles", str(spec_file),
                   str(out_file)] + ([] if cache_enabled else ["--no-cache"])
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return _refused(spec, profile, f"the {profile} profile's process ran past "
                                           f"{timeout_s:.0f} s", like=like) + rows
        if done.returncode != 0 or not out_file.exists():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return _refused(spec, profile, f"the {profile} profile's process failed: "
                                           f"{last}", like=like) + rows
        written = json.loads(out_file.read_text())
        found = [VariantResult.from_dict(d) for d in written["rows"]]
    roofs = capped_roofs(written.get("peaks"))
    variants = {v.name: v for v in spec.variants}
    for r in found:
        entry = dict(r.runtime or {"name": "eager", "variant": r.name})
        entry.setdefault("variant", r.name)
        entry["profile"] = {**label(profile), **({"peaks": roofs} if roofs else {})}
        r.runtime, r.name = entry, profile_name(r.name, profile)
        variant = variants.get(entry["variant"])
        if entry["name"] in TORCH_RUNTIMES and variant is not None and r.error is None and \
                precisions.get(deployed_precision(variant, r.config)).integer:
            # Measured: a quantized convolution took 13.5 ms with and without SSE41's cap
            # (FBGEMM), the float one 35 and 74 ms (oneDNN). Its time here is the native one.
            r.error = (f"PyTorch's quantized kernels (FBGEMM) dispatch on the CPU's own flags "
                       f"and do not obey the cap: no {profile} preview of {entry['variant']} "
                       f"under {entry['name']} (its OpenVINO cell is one)")
    return found + rows


def capped_roofs(peaks: dict | None) -> dict | None:
    """{device: what the roofline reads of its peaks} from a capped process's environment
    card: its compute and memory roofs, the theoretical ones of the instruction sets the cap
    leaves, and why a precision has none."""
    if not peaks:
        return None
    kept = ("isa_cap", "gemm_flops_per_s", "memory_bytes_per_s", "unsupported", "measured_at")
    return {device: {**{k: p.get(k) for k in kept},
                     "theoretical": {"gemm_flops_per_s": (p.get("theoretical") or {})
                                     .get("gemm_flops_per_s")}}
            for device, p in peaks.items()}


def _child(argv: list[str]) -> int:
    """The profile's own process: the sweep as given, timed and held to the roofs of its cap
    (measured under it the first time on this machine, a few seconds); its rows and those
    roofs written as JSON."""
    from benchmarks.run.cache import WeightsCache
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.spec.sweep import SweepSpec
    spec = SweepSpec.from_dict(json.loads(Path(argv[0]).read_text()))
    sweep = prepare_sweep(spec, cache=WeightsCache(enabled="--no-cache" not in argv))
    sweep.attach_peaks(None)  # the machine's file beside the weights cache, keyed by the cap
    rows = [r.to_dict() for r in sweep.run()]
    Path(argv[1]).write_text(json.dumps({"rows": rows, "peaks": sweep.environment.get("peaks")},
                                        default=str))
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
