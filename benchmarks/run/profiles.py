"""A sweep timed again under each instruction-set profile (``benchmarks.spec.isa``): another
CPU's verdict previewed on this machine (issue 34.5).

oneDNN reads its cap once, at its first dispatch, so each capped profile runs the sweep in a
process of its own (``python -m benchmarks.run.profiles SPEC OUT --profile NAME``,
``ONEDNN_MAX_CPU_ISA`` set), its variants from the weights cache the native sweep filled
(nothing retrains), every row and its baseline timed together in that process's interleaved
rounds: a profile's speed-ups are against its own baseline, never across profiles. Each row
is named ``variant [profile]`` and its ``runtime.profile`` says its cap and whether it is a
preview (a cap below this CPU's widest) or this machine's own figure, and carries the roofs
measured under the cap in that process (``runtime.profile.peaks``, kept per machine and cap):
a preview's % peak is against the capped roof, never the native one.

Only oneDNN's kernels obey the cap, so that process reads the kernels each PyTorch cell ran
(``measure.onednn.census``, one forward under oneDNN's verbose log, before the timing) into
``runtime.profile.kernels``; a cell whose kernels mostly ignore the cap (FBGEMM's quantized
linears, MKL's float matmuls) and a runtime known to ignore it (ONNX Runtime's MLAS) are
"n/a" rows saying why (``not_applicable``: no figure, not a failure). A profile whose
process fails gets one failed row per variant with its last line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.report.records import Timing
from benchmarks.report.results import VariantResult
from benchmarks.spec.isa import KNOWN, NATIVE, READ_BY_KERNELS, cap_rank, get, known_reason, label

# A PyTorch cell is a preview where at least this share of its convolution and linear layers'
# multiply-adds ran in oneDNN kernels at or below the cap. The rest ran at this CPU's own
# speed, so the figure is optimistic by about that share of the time times what the cap
# would have cost it: at a tenth and a 2x slowdown, 10%, inside what a grid's paired rounds
# can tell apart (about 30%: report.runtimes). Below it the figure is more this CPU's than
# the profile's: n/a, naming the layers that ran outside oneDNN. A partial preview says its
# share (``kernels.obey``, the grid's "N% capped").
PREVIEW_SHARE = 0.9
OUTSIDE_NAMED = 4  # layers an n/a reason names (then "and N more")


def profile_name(name: str, profile: str) -> str:
    return f"{name} [{profile}]"


def mark_native(results: list[VariantResult]) -> None:
    """The native sweep's rows, labelled as the machine as it is."""
    for r in results:
        entry = dict(r.runtime or {"name": "eager", "variant": r.name})
        entry["profile"] = label(NATIVE)
        r.runtime = entry


def not_previewed(runtime: str, kernels: dict | None) -> str | None:
    """Why a cell timed under a cap is no preview of it; None where it is one: a PyTorch cell
    by the kernels it ran (``PREVIEW_SHARE``), another runtime by what is known of it."""
    if runtime not in READ_BY_KERNELS:
        return known_reason(runtime)
    share = (kernels or {}).get("obey")
    if share is None:
        return f"its kernels could not be read ({(kernels or {}).get('why', 'not read')})"
    if share >= PREVIEW_SHARE:
        return None
    outside = kernels.get("outside") or []
    named = ", ".join(outside[:OUTSIDE_NAMED]) + (
        f" and {len(outside) - OUTSIDE_NAMED} more" if len(outside) > OUTSIDE_NAMED else "")
    above = kernels.get("above_cap") or []
    return (f"{share:.0%} of its multiply-adds ran in oneDNN kernels under the cap" +
            (f"; outside oneDNN (FBGEMM, MKL or PyTorch's own kernels, which dispatch on the "
             f"CPU's own flags): {named}" if outside else "") +
            (f"; above the cap: {', '.join(above)}" if above else ""))


def _rows(spec, profile: str, runtimes=None, like=None, *, error: str | None = None,
          reasons: dict | None = None) -> list[VariantResult]:
    """One figureless row per variant (and runtime), at the batch size and threads of
    ``like`` (a native row), so it sits in its profile's grid: failed with ``error``, or
    n/a with its runtime's reason in ``reasons``."""
    rows = []
    for v in spec.variants:
        for runtime in ("eager",) if runtimes is None else runtimes:
            name = v.name if runtime == "eager" else f"{v.name}@{runtime}"
            entry = {"name": runtime, "variant": v.name, "profile": label(profile)}
            if reasons is not None:  # n/a: not a preview, whatever the cap
                entry["profile"].update(preview=False, kernels=_known(runtime))
            if like is not None:
                entry["threads"] = (like.runtime or {}).get("threads")
            rows.append(VariantResult(
                name=profile_name(name, profile), techniques=list(v.techniques),
                error=error, runtime=entry, timing=Timing(
                    batch_size=like.timing.batch_size if like is not None else spec.batch_size),
                not_applicable=None if reasons is None else
                f"no {profile} preview of {v.name} under {runtime}: {reasons[runtime]}"))
    return rows


def _known(runtime: str) -> dict:
    """The kernels entry of a runtime PyTorch's oneDNN log cannot see into."""
    said = "known" if runtime in KNOWN else "not known"
    return {"obey": None, "how": f"not read ({said}: docs/performance-notes.md); PyTorch's "
                                 f"oneDNN log does not see into {runtime}"}


def _without_figures(r: VariantResult, why: str) -> VariantResult:
    """A cell timed under a cap it did not obey: its name, place and kernels, no figure (its
    time is this CPU's own, whatever its name says), and no preview."""
    r.runtime["profile"]["preview"] = False
    return VariantResult(name=r.name, techniques=list(r.techniques), config=r.config,
                         device=r.device, axes=r.axes, runtime=r.runtime, not_applicable=why,
                         timing=Timing(batch_size=r.timing.batch_size))


def run_profile(spec, profile: str, *, cache_enabled: bool = True,
                timeout_s: float | None = None, like=None) -> list[VariantResult]:
    """The rows of ``spec`` timed under ``profile`` (not native), in a process of its own;
    ``like``: a native row, whose batch size and threads a figureless row takes."""
    capped = get(profile)
    reasons = {r: known_reason(r) for r in spec.runtimes}
    timed = tuple(r for r in spec.runtimes if reasons[r] is None)
    rows = _rows(spec, profile, [r for r in spec.runtimes if reasons[r] is not None], like,
                 reasons=reasons)
    child = dataclasses.replace(spec, isa=(), runtimes=timed)
    with tempfile.TemporaryDirectory(prefix="compression-bench-isa-") as tmp:
        spec_file, out_file = Path(tmp) / "spec.json", Path(tmp) / "rows.json"
        spec_file.write_text(json.dumps(child.to_dict()))
        env = {**os.environ, "ONEDNN_MAX_CPU_ISA": capped.cap, "DNNL_MAX_CPU_ISA": capped.cap}
        command = [sys.executable, "-m", "benchmarks.run.profiles", str(spec_file),
                   str(out_file), "--profile", profile] + \
            ([] if cache_enabled else ["--no-cache"])
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env,
                                  timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return _rows(spec, profile, like=like, error=f"the {profile} profile's process "
                                                          f"ran past {timeout_s:.0f} s") + rows
        if done.returncode != 0 or not out_file.exists():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return _rows(spec, profile, like=like, error=f"the {profile} profile's process "
                                                          f"failed: {last}") + rows
        written = json.loads(out_file.read_text())
        found = [VariantResult.from_dict(d) for d in written["rows"]]
    roofs = capped_roofs(written.get("peaks"))
    out = []
    for r in found:
        entry = {"name": "eager", **(r.runtime or {})}  # a sweep without cells has none
        entry.setdefault("variant", r.name)
        if like is not None:  # the threads it ran on: in its profile's grid, not beside it
            entry.setdefault("threads", (like.runtime or {}).get("threads"))
        kernels = entry.pop("kernels", None)
        entry["profile"] = {**label(profile), "kernels": kernels or _known(entry["name"]),
                            **({"peaks": roofs} if roofs else {})}
        r.runtime, r.name = entry, profile_name(r.name, profile)
        if r.error is None:  # a failure stays one
            why = not_previewed(entry["name"], kernels)
            if why is not None:
                r = _without_figures(r, f"no {profile} preview of {entry['variant']} under "
                                        f"{entry['name']}: {why}")
            elif kernels is not None and kernels.get("obey") is not None and \
                    kernels["obey"] < 1:
                entry.setdefault("notes", []).append(
                    f"a partial preview: {kernels['obey']:.0%} of its multiply-adds ran in "
                    f"kernels under the {profile} cap, the rest at this CPU's own speed "
                    f"({', '.join(kernels.get('outside') or []) or 'above the cap'})")
        out.append(r)
    return out + rows


def read_kernels(profile: str):
    """The hook (``PreparedSweep.on_resident``) a profile's process reads each PyTorch row's
    kernels with, into ``runtime["kernels"]`` (``measure.onednn.census``), at the threads and
    batch it is timed at."""
    import torch

    from benchmarks.measure.onednn import census
    rank = cap_rank(profile)

    def read(variant, entry) -> None:
        runtime = entry.result.runtime if entry.result.runtime is not None else {}
        if runtime.get("name", "eager") not in READ_BY_KERNELS:
            return
        before = torch.get_num_threads()
        torch.set_num_threads(entry.threads or before)
        try:
            found = census(entry.model, variant.model, entry.example.to(entry.device), rank,
                           entry.autocast_dtype)
        finally:
            torch.set_num_threads(before)
        entry.result.runtime = {**runtime, "kernels": found}
    return read


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
    if "--profile" in argv:
        sweep.on_resident = read_kernels(argv[argv.index("--profile") + 1])
    sweep.attach_peaks(None)  # the machine's file beside the weights cache, keyed by the cap
    rows = [r.to_dict() for r in sweep.run()]
    Path(argv[1]).write_text(json.dumps({"rows": rows, "peaks": sweep.environment.get("peaks")},
                                        default=str))
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
