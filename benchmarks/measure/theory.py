"""What a device can do at most: its theoretical peaks, from what it reports. Torch-free.

A measured peak (``benchmarks.measure.peaks``) is checked against these, and the roofline
draws them as a second, dashed roof: a measured roof far below the theoretical one was taken
on a busy machine, one above it means the clock read is not the clock run.

CPU: cores x clock x FLOP per cycle per core, for each precision, the FLOP per cycle from the
instruction set ``/proc/cpuinfo``'s flags name (``CPU_RULES``: first matching rule wins).
A multiply-add counts two FLOPs, the convention of every GEMM figure here (int8 alike):

- fp32: two FMA pipes each doing a fused multiply-add per lane per cycle. AVX2 + FMA (Haswell
  on, Zen 2 and 3): 2 pipes x 8 lanes x 2 = 32. Zen 1 has 128-bit pipes: 16. AVX-512 on
  Intel server parts: two 512-bit units, 64 (parts with one unit reach half). Zen 4 runs
  AVX-512 on its two 256-bit pipes: still 32; Zen 5's are 512 bits wide: 64.
- bf16: AVX512_BF16's ``vdpbf16ps`` takes two bf16 products per fp32 lane: twice fp32.
  AMX (Sapphire Rapids on): a tile multiply of 1024 bf16 FLOPs per cycle per core. Without
  either (AVX2 only, as Zen 3) nothing multiplies bf16: it is widened to fp32 and multiplied
  there, so the fp32 rate is its bound (and the libraries' fallbacks run far below it).
- int8: VNNI's ``vpdpbusd`` (AVX512_VNNI, AVX_VNNI) sums four u8 x s8 products into each
  32-bit lane: four times fp32. AMX: 2048 per cycle per core. AVX2 without VNNI (fbgemm's
  kernels on Zen 3): ``vpmaddubsw`` + ``vpmaddwd`` + ``vpaddd`` do 32 multiply-adds in three
  instructions, two of them on the multiply pipes: one group per cycle on two pipes, 64 ops,
  twice fp32.

The clock: the one a core was measured to sustain (``benchmarks.measure.clock``, a chain of
dependent adds, cached with the peaks) where it was measured and above the one the kernel
states, else the highest the kernel states: cpufreq's ``cpuinfo_max_freq`` where it exists,
else the highest ``cpu MHz`` of ``/proc/cpuinfo``. Under a hypervisor that is often the base
clock (2.6 GHz stated, 4.1 sustained on the Sapphire Rapids this was measured on, where a
1024^3 fp32 matmul reached 104% of a roof built on 2.6). Both are recorded (``clock_ghz`` is
the one used, ``nominal_clock_ghz`` the stated one): a roof is an upper bound, so a chain read
below the stated clock (preempted) does not lower it.

GPU: the vendor's dense peaks (no 2:4 sparsity) by name (``GPU_SPECS``, from the data sheets).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from benchmarks.measure import precisions
from benchmarks.spec.isa import CAP_VARIABLE, capped_flags, process_cap

CPUINFO = Path("/proc/cpuinfo")
MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")

# (precision, required flags, FLOP/cycle/core, or a factor of fp32's as "x2", what it is).
# Vendor-specific fp32 rules carry "vendor:family>=N" tests (AMD's family 25 is Zen 3 and 4,
# 26 Zen 5; Zen 4 is family 25 with AVX-512).
CPU_RULES = (
    ("fp32", ("avx512f", "amd", "family>=26"), 64, "AVX-512 on two 512-bit FMA pipes (Zen 5)"),
    ("fp32", ("avx512f", "amd"), 32, "AVX-512 double-pumped on two 256-bit FMA pipes (Zen 4)"),
    ("fp32", ("avx512f",), 64, "AVX-512 on two 512-bit FMA units"),
    ("fp32", ("avx2", "fma", "amd", "family<23.3"), 16,
     "AVX2 + FMA on two 128-bit pipes (Zen 1)"),
    ("fp32", ("avx2", "fma"), 32, "AVX2 + FMA on two 256-bit FMA pipes"),
    ("fp32", ("avx",), 16, "AVX without FMA: one 256-bit add and one multiply per cycle"),
    ("fp32", ("sse2",), 8, "SSE2: one 128-bit add and one multiply per cycle"),
    ("fp32", ("asimd",), 16, "Arm NEON: two 128-bit FMA pipes"),
    ("bf16", ("amx_bf16",), 1024, "AMX tile multiply"),
    ("bf16", ("avx512_bf16",), "x2", "AVX512_BF16 dot products (two bf16 per fp32 lane)"),
    ("bf16", (), "x1~", "no bf16 instructions: widened to fp32, so fp32's rate bounds it"),
    ("int8", ("amx_int8",), 2048, "AMX tile multiply"),
    ("int8", ("avx512_vnni",), "x4", "AVX512_VNNI vpdpbusd (four int8 products per lane)"),
    ("int8", ("avx_vnni",), "x4", "AVX-VNNI vpdpbusd (four int8 products per lane)"),
    ("int8", ("avx2",), "x2", "AVX2 vpmaddubsw + vpmaddwd + vpaddd, no VNNI"),
)

# Dense peaks in TFLOP/s (TOPS for int8) from NVIDIA's data sheets, sparsity excluded; the
# first entry whose every pattern is in the lower-cased device name wins (specific first).
GPU_SPECS = (
    (("h200", "nvl"), {"fp32": 60, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "int8": 1670.5}),
    (("h200",), {"fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "int8": 1979}),
    (("h100", "nvl"), {"fp32": 60, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "int8": 1670.5}),
    (("h100", "pcie"), {"fp32": 51.2, "tf32": 378, "bf16": 756, "fp16": 756, "int8": 1513}),
    (("h100",), {"fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "int8": 1979}),
    (("a100",), {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "int8": 624}),
    (("l40s",), {"fp32": 91.6, "tf32": 183, "bf16": 362, "fp16": 362, "int8": 733}),
    (("l4",), {"fp32": 30.3, "tf32": 60, "bf16": 121, "fp16": 121, "int8": 242}),
    (("a10",), {"fp32": 31.2, "tf32": 62.5, "bf16": 125, "fp16": 125, "int8": 250}),
    (("t4",), {"fp32": 8.1, "fp16": 65, "int8": 130}),
    (("v100",), {"fp32": 15.7, "fp16": 125}),
)


# -- the CPU ---------------------------------------------------------------------------------

def parse_cpuinfo(text: str) -> dict:
    """What the peaks need from ``/proc/cpuinfo``: vendor, family, model, name, flags, the
    highest clock it states (MHz) and the physical cores (distinct socket and core ids)."""
    info = {"vendor": "", "family": None, "model": None, "name": "", "flags": set(),
            "mhz": None, "cores": None}
    cores = set()
    entry: dict = {}
    for line in text.splitlines() + [""]:
        if not line.strip():
            if "core id" in entry:
                cores.add((entry.get("physical id", "0"), entry["core id"]))
            entry = {}
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        entry[key] = value
        if key == "vendor_id":
            info["vendor"] = "amd" if "AMD" in value else "intel" if "Intel" in value else value
        elif key == "cpu family" and value.isdigit():
            info["family"] = int(value)
        elif key == "model" and value.isdigit():
            info["model"] = int(value)
        elif key == "model name":
            info["name"] = value
        elif key in ("flags", "Features"):  # Features: the Arm kernel's name for them
            info["flags"] |= set(value.split())
        elif key == "cpu MHz":
            try:
                info["mhz"] = max(info["mhz"] or 0.0, float(value))
            except ValueError:
                pass
    info["cores"] = len(cores) or None
    return info


def _matches(requirement: str, info: dict) -> bool:
    if requirement in ("amd", "intel"):
        return info["vendor"] == requirement
    m = re.fullmatch(r"family([<>]=?)(\d+)(?:\.(\d+))?", requirement)
    if m:
        # family<23.3: AMD family 23 (0x17) below model 0x30 is Zen 1 / Zen+.
        op, family, model = m.group(1), int(m.group(2)), int(m.group(3) or 0) * 16
        have = ((info["family"] or 0), (info["model"] or 0))
        want = (family, model)
        return have >= want if op == ">=" else have < want
    return requirement in info["flags"]


def flop_per_cycle(info: dict) -> dict:
    """{precision: (FLOP per cycle per core, native?, what it is)}: native is False where no
    instruction computes in that precision (bf16 on AVX2: the fp32 rate bounds it)."""
    out: dict = {}
    for precision, needs, value, what in CPU_RULES:
        if precision in out or not all(_matches(n, info) for n in needs):
            continue
        if isinstance(value, str):  # a factor of fp32's rate
            if "fp32" not in out:
                continue
            factor = float(value.strip("x~"))
            out[precision] = (out["fp32"][0] * factor, not value.endswith("~"), what)
        else:
            out[precision] = (float(value), True, what)
    return out


def cpu_clock_ghz(info: dict, max_freq_khz: float | None = None) -> tuple[float | None, str]:
    """(GHz, where it came from): cpufreq's maximum, else the highest ``cpu MHz``."""
    if max_freq_khz:
        return max_freq_khz / 1e6, "cpufreq cpuinfo_max_freq"
    if info.get("mhz"):
        return info["mhz"] / 1e3, ("/proc/cpuinfo cpu MHz (the clock the kernel reports; "
                                   "a boost may run above it)")
    return None, "no clock reported"


def cpu_theoretical(threads: int, cpuinfo_text: str | None = None,
                    max_freq_khz: float | None = None,
                    sustained_ghz: float | None = None, cap: str | None = None) -> dict | None:
    """The CPU's theoretical peaks on ``threads`` cores (one thread per core: SMT siblings
    share the FMA pipes, so threads beyond the physical cores add nothing); None where the
    clock or the instruction set is unknown. Reads this machine when no text is given.
    ``sustained_ghz``: the clock measured on it (``measure.clock``), used where it is above the
    stated one. ``cap``: the instruction-set cap the kernels run under (``spec.isa``), whose
    withheld instruction sets the peaks are not built on."""
    if cpuinfo_text is None:
        cpuinfo_text, max_freq_khz = _read_cpu()
    info = parse_cpuinfo(cpuinfo_text)
    info["flags"] = capped_flags(info["flags"], cap)
    nominal, clock_source = cpu_clock_ghz(info, max_freq_khz)
    ghz = nominal
    if sustained_ghz and (nominal is None or sustained_ghz > nominal):
        ghz, clock_source = sustained_ghz, (f"measured: the clock a core sustains under a "
                                            f"dependent add chain (stated: {clock_source})")
    rates = flop_per_cycle(info)
    if ghz is None or "fp32" not in rates:
        return None
    cores = min(int(threads), info["cores"] or os.cpu_count() or int(threads))
    peaks, native, per_cycle, derivation = {}, {}, {}, {}
    for precision in precisions.on_device("cpu"):
        if precision not in rates:
            continue
        per, is_native, what = rates[precision]
        peaks[precision] = cores * ghz * 1e9 * per
        native[precision], per_cycle[precision] = is_native, per
        derivation[precision] = (f"{cores} core(s) x {ghz:.3f} GHz x {per:g} FLOP/cycle: "
                                 f"{what}")
    isa = [f for f in ("amx_int8", "amx_bf16", "avx512_bf16", "avx512_vnni", "avx_vnni",
                       "avx512f", "avx2", "fma", "avx", "asimd") if f in info["flags"]]
    return {"gemm_flops_per_s": peaks, "native": native, "flop_per_cycle": per_cycle,
            "cores": cores, "clock_ghz": ghz, "clock_source": clock_source,
            "nominal_clock_ghz": nominal, "sustained_clock_ghz": sustained_ghz,
            "isa": " ".join(isa) or "none of the vector extensions the rules know",
            "cpu": info["name"], "derivation": derivation, "cap": cap,
            "source": "cores x clock x FLOP/cycle for the instruction set /proc/cpuinfo names"
                      + (f" (capped: {CAP_VARIABLE}={cap})" if cap else "")}


def clock_text(theory: dict | None) -> str:
    """The clock a CPU's theoretical peaks are built on, for a card: "at 4.04 GHz (measured;
    stated 2.60)"; empty for a GPU's (its data sheet) or where none is known."""
    ghz = (theory or {}).get("clock_ghz")
    if not ghz:
        return ""
    stated = theory.get("nominal_clock_ghz")
    if theory.get("sustained_clock_ghz") and stated and ghz > stated:
        return f"at {ghz:.2f} GHz (measured; stated {stated:.2f})"
    return f"at {ghz:.2f} GHz (stated)"


def _read_cpu() -> tuple[str, float | None]:
    try:
        text = CPUINFO.read_text()
    except OSError:
        text = ""
    try:
        khz = float(MAX_FREQ.read_text().strip())
    except (OSError, ValueError):
        khz = None
    return text, khz


# -- GPUs ------------------------------------------------------------------------------------

def gpu_theoretical(name: str) -> dict | None:
    """A GPU's dense peaks from ``GPU_SPECS`` by its name (``torch.cuda.get_device_name``);
    None for a GPU the table does not know."""
    lowered = (name or "").lower()
    for patterns, spec in GPU_SPECS:
        if all(re.search(rf"(?<![a-z0-9]){re.escape(p)}(?![a-z0-9])", lowered)
               for p in patterns):
            return {"gemm_flops_per_s": {k: v * 1e12 for k, v in spec.items()},
                    "native": {k: True for k in spec},
                    "matched": " ".join(patterns), "gpu": name,
                    "source": "the vendor's data sheet, dense (no 2:4 sparsity)"}
    return None


def theoretical(device_type: str, device_name: str, threads: int,
                sustained_ghz: float | None = None) -> dict | None:
    """The theoretical peaks of a device: the CPU's from its instruction set (at the clock
    measured on it, where given and higher than the stated one, and under this process's
    instruction-set cap), a GPU's from the table."""
    if device_type == "cuda":
        return gpu_theoretical(device_name)
    return cpu_theoretical(threads, sustained_ghz=sustained_ghz, cap=process_cap())
